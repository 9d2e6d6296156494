package nodeshutdown

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/podrules"
)

// The kubelet's words.
const (
	reasonNodeShutdown = "NodeShutdown"
	messageRejected    = "Pod was rejected as the node is shutting down."
	reasonTerminated   = "Terminated"
	messageTerminated  = "Pod was terminated in response to imminent node shutdown."
	// DefaultLogindConfDir is where logind reads the kubelet's override of InhibitDelayMaxSec.
	DefaultLogindConfDir = "/etc/systemd/logind.conf.d"
	// reconnectPeriod is how often a lost D-Bus connection is made again.
	reconnectPeriod = time.Second
	// pollPeriod is how often a group's pods are looked at while they stop.
	pollPeriod = 300 * time.Millisecond
)

// errShuttingDown is the node's readiness error while it shuts down.
var errShuttingDown = errors.New("node is shutting down")

// logind is what the manager asks of systemd-logind (logindBus).
type logind interface {
	InhibitDelayMax() (time.Duration, error)
	Inhibit() (*os.File, error)
	OverrideInhibitDelay(d time.Duration) error
	WatchShutdown() (<-chan bool, error)
	Close() error
}

// Pods are the node's pods as the pod workers know them (podlifecycle.Reconciler).
type Pods interface {
	// AdmittedPods are the pods admitted and not terminated.
	AdmittedPods() []*corev1.Pod
	// KillPod stops a pod within gracePeriod seconds; its final status is Failed with reason, message and
	// condition. It returns at once.
	KillPod(pod *corev1.Pod, gracePeriod int64, reason, message string, condition *corev1.PodCondition)
	// PodCleanedUp reports whether nothing of the pod runs any more.
	PodCleanedUp(uid types.UID) bool
}

// Group is a priority group: the pods whose priority is at least Priority (and below the next group's)
// stop within Period.
type Group struct {
	Priority int32
	Period   time.Duration
}

// Groups are the priority groups a KubeletConfiguration asks for, lowest priority first:
// shutdownGracePeriodByPodPriority as it is, or shutdownGracePeriod and shutdownGracePeriodCriticalPods as
// two groups — priority 0 with the difference, and system-critical priority with the critical period —
// as the kubelet makes them. None: graceful node shutdown is off.
func Groups(kc *kubeletconfigv1beta1.KubeletConfiguration) []Group {
	var out []Group
	for _, g := range kc.ShutdownGracePeriodByPodPriority {
		out = append(out, Group{Priority: g.Priority, Period: time.Duration(g.ShutdownGracePeriodSeconds) * time.Second})
	}
	if len(out) == 0 {
		period, critical := kc.ShutdownGracePeriod.Duration, kc.ShutdownGracePeriodCriticalPods.Duration
		if period <= 0 || critical > period {
			return nil
		}
		out = []Group{{Priority: 0, Period: (period - critical).Truncate(time.Second)}, {Priority: podrules.SystemCriticalPriority, Period: critical.Truncate(time.Second)}}
	}
	slices.SortStableFunc(out, func(a, b Group) int { return int(int64(a.Priority) - int64(b.Priority)) })
	return out
}

// Options configure a Manager.
type Options struct {
	// Groups are the priority groups (Groups); none turns the manager off.
	Groups []Group
	// Pods are the pods to stop (nil: given later with UsePods).
	Pods     Pods
	Recorder record.EventRecorder
	NodeName string
	Clock    clock.WithTicker
	Log      logr.Logger
	// SyncNode asks for the Node's status to be written now (it turns NotReady). It must not block.
	SyncNode func()
	// StateDir holds graceful_node_shutdown_state (the root directory).
	StateDir string
	// LogindConfDir is where the InhibitDelayMaxSec override is written (default DefaultLogindConfDir).
	LogindConfDir string
	// connect reaches logind (default: the system D-Bus).
	connect func(ctx context.Context, confDir string) (logind, error)
}

// Manager is the node shutdown manager.
type Manager struct {
	opts         Options
	pods         atomic.Pointer[Pods]
	shuttingDown atomic.Bool
	metrics      *metrics

	mu   sync.Mutex
	lock *os.File // the inhibitor lock held, nil when none
}

// New builds the manager; with no groups it does nothing (Enabled is false).
func New(opts Options) *Manager {
	if opts.LogindConfDir == "" {
		opts.LogindConfDir = DefaultLogindConfDir
	}
	if opts.connect == nil {
		opts.connect = connectLogind
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.SyncNode == nil {
		opts.SyncNode = func() {}
	}
	m := &Manager{opts: opts, metrics: newMetrics()}
	if opts.Pods != nil {
		m.UsePods(opts.Pods)
	}
	return m
}

// UsePods gives the manager the pods it stops, when they come after it (the pod workers admit pods with
// the manager's Admit). Until then a shutdown stops none.
func (m *Manager) UsePods(p Pods) { m.pods.Store(&p) }

// Enabled reports whether graceful node shutdown is configured.
func (m *Manager) Enabled() bool { return len(m.opts.Groups) > 0 }

// RegisterMetrics registers the last shutdown's start and end times.
func (m *Manager) RegisterMetrics(reg prometheus.Registerer) error { return m.metrics.register(reg) }

// ShutdownStatus is the node's readiness error while it shuts down (nil otherwise).
func (m *Manager) ShutdownStatus() error {
	if m.shuttingDown.Load() {
		return errShuttingDown
	}
	return nil
}

// Admit rejects pods while the node shuts down (the kubelet's NodeShutdown).
func (m *Manager) Admit(*corev1.Pod) (ok bool, reason, message string) {
	if m.shuttingDown.Load() {
		return false, reasonNodeShutdown, messageRejected
	}
	return true, "", ""
}

// Start takes the inhibitor lock and follows logind's shutdown signals until ctx ends; a lost D-Bus
// connection is made again every second. If the first attempt fails the manager stays idle, as the
// kubelet's: the error is logged and the agent runs on. Off (no groups), it only waits for ctx.
func (m *Manager) Start(ctx context.Context) error {
	log := m.opts.Log
	if st, err := loadState(m.opts.StateDir); err != nil {
		log.Error(err, "Failed to read the graceful shutdown state")
	} else {
		m.metrics.set(st)
	}
	if !m.Enabled() {
		<-ctx.Done()
		return nil
	}
	log.Info("Creating node shutdown manager", "groups", fmt.Sprint(m.opts.Groups))
	events, conn, err := m.start(ctx)
	if err != nil {
		log.Error(err, "Failed to start node shutdown manager")
		<-ctx.Done()
		return nil
	}
	for {
		m.watch(ctx, conn, events)
		_ = conn.Close()
		if events, conn = m.reconnect(ctx); conn == nil {
			return nil
		}
	}
}

// reconnect makes the watch again, trying every second until it works or ctx ends (nil).
func (m *Manager) reconnect(ctx context.Context) (<-chan bool, logind) {
	for {
		select {
		case <-ctx.Done():
			return nil, nil
		case <-m.opts.Clock.After(reconnectPeriod):
		}
		m.opts.Log.V(1).Info("Restarting watch for node shutdown events")
		events, conn, err := m.start(ctx)
		if err == nil {
			return events, conn
		}
		m.opts.Log.Error(err, "Unable to watch the node for shutdown events")
	}
}

// start connects to logind, makes sure its InhibitDelayMaxSec covers the groups' periods, takes the lock
// and subscribes to the shutdown signals.
func (m *Manager) start(ctx context.Context) (<-chan bool, logind, error) {
	l, err := m.opts.connect(ctx, m.opts.LogindConfDir)
	if err != nil {
		return nil, nil, err
	}
	events, err := m.prepare(ctx, l)
	if err != nil {
		_ = l.Close()
		return nil, nil, err
	}
	return events, l, nil
}

func (m *Manager) prepare(ctx context.Context, l logind) (<-chan bool, error) {
	requested := m.totalPeriod()
	current, err := l.InhibitDelayMax()
	if err != nil {
		return nil, err
	}
	if requested > current {
		if err := l.OverrideInhibitDelay(requested); err != nil {
			return nil, fmt.Errorf("unable to override inhibit delay by shutdown manager: %w", err)
		}
		// logind reads its configuration again in its own time: 5 reads over about 1.5 s.
		wait := 100 * time.Millisecond
		for i := 0; ; i++ {
			if current, err = l.InhibitDelayMax(); err != nil {
				return nil, err
			}
			if current >= requested {
				break
			}
			if i == 4 {
				return nil, fmt.Errorf("node shutdown manager was timed out after 5 attempts waiting for logind InhibitDelayMaxSec to update to %v (ShutdownGracePeriod), current value is %v", requested, current)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-m.opts.Clock.After(wait):
			}
			wait *= 2
		}
	}
	if err := m.acquire(l); err != nil {
		return nil, err
	}
	events, err := l.WatchShutdown()
	if err != nil {
		m.release()
		return nil, err
	}
	return events, nil
}

// totalPeriod is the longest a shutdown takes: the groups one after the other.
func (m *Manager) totalPeriod() time.Duration {
	var d time.Duration
	for _, g := range m.opts.Groups {
		d += g.Period
	}
	return d
}

// acquire takes a new inhibitor lock, then releases the one held before.
func (m *Manager) acquire(l logind) error {
	f, err := l.Inhibit()
	if err != nil {
		return err
	}
	m.mu.Lock()
	old := m.lock
	m.lock = f
	m.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return nil
}

// release lets the shutdown go on.
func (m *Manager) release() {
	m.mu.Lock()
	f := m.lock
	m.lock = nil
	m.mu.Unlock()
	if f != nil {
		_ = f.Close()
	}
}

// watch handles shutdown signals until the channel closes (the connection is gone) or ctx ends. A
// shutdown is handled to its end before the next signal is read, as by the kubelet.
func (m *Manager) watch(ctx context.Context, l logind, events <-chan bool) {
	log := m.opts.Log
	ref := &corev1.ObjectReference{Kind: "Node", Name: m.opts.NodeName, UID: types.UID(m.opts.NodeName)}
	for {
		var shutdown bool
		var ok bool
		select {
		case <-ctx.Done():
			return
		case shutdown, ok = <-events:
		}
		if !ok {
			log.V(1).Info("Ended to watching the node for shutdown events")
			return
		}
		log.V(1).Info("Shutdown manager detected new shutdown event", "isNodeShuttingDownNow", shutdown)
		msg := "Shutdown manager detected shutdown cancellation"
		if shutdown {
			msg = "Shutdown manager detected shutdown event"
		}
		m.opts.Recorder.Event(ref, corev1.EventTypeNormal, "Shutdown", msg)
		m.shuttingDown.Store(shutdown)
		if !shutdown {
			if err := m.acquire(l); err != nil {
				log.Error(err, "Taking the inhibitor lock again after a cancelled shutdown failed")
			}
			m.opts.SyncNode()
			continue
		}
		m.opts.SyncNode()
		m.processShutdown(ctx)
	}
}
