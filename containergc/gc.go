package containergc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/periodic"
	"github.com/nodelet/nodelet/runtime/pleg"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// GCPeriod is how often the Collector collects: the kubelet's ContainerGCPeriod.
const GCPeriod = time.Minute

// ReasonContainerGCFailed is the kubelet's event reason for a failed pass (pkg/kubelet/events).
const ReasonContainerGCFailed = "ContainerGCFailed"

// LegacyContainerLogsDir is where the kubelet keeps its legacy container log symlinks.
const LegacyContainerLogsDir = "/var/log/containers"

// Runtime is what the Collector asks of the container runtime; *runtime.Client implements it. Errors
// wrap runtime.ErrNotFound for a container or sandbox that does not exist.
type Runtime interface {
	// ListContainers must list every container, exited ones included, for a nil filter.
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	StopContainer(ctx context.Context, id string, timeout int64) error
	RemoveContainer(ctx context.Context, id string) error
	StopPodSandbox(ctx context.Context, id string) error
	RemovePodSandbox(ctx context.Context, id string) error
}

// Pods tells the Collector about the node's pods; *podlifecycle.Reconciler implements it.
type Pods interface {
	// PodsForGC returns every pod UID the node still has, mapped to whether a worker is terminating it
	// or removing what it left (busy: nothing of it may be removed); a UID it does not name is gone once
	// sourcesReady. It must be a snapshot taken when called.
	PodsForGC(ctx context.Context) (pods map[types.UID]bool, sourcesReady bool)
}

// Recorder records the Collector's events; client-go's record.EventRecorder implements it.
type Recorder interface {
	Event(object apiruntime.Object, eventtype, reason, message string)
}

// Policy is the kubelet's container GCPolicy, from its flags.
type Policy struct {
	// MinAge is --minimum-container-ttl-duration: a container created less than this long ago is not
	// removed.
	MinAge time.Duration
	// MaxPerPodContainer is --maximum-dead-containers-per-container: the dead containers kept per pod
	// UID and container name (negative: no limit).
	MaxPerPodContainer int
	// MaxContainers is --maximum-dead-containers: the dead containers kept on the node (negative: no
	// limit).
	MaxContainers int
}

// Options are what New needs. Runtime and Pods are required.
type Options struct {
	Runtime Runtime
	Pods    Pods
	// Clock is the clock of ages and the period (default: the real clock).
	Clock clock.WithTicker
	// Recorder records ContainerGCFailed on the Node named NodeName (nil: none).
	Recorder Recorder
	NodeName string
	Policy   Policy
	// PodLogsDir is the kubelet's podLogsDir (default /var/log/pods): the pods' log directories, and the
	// only place log files are removed from.
	PodLogsDir string
	// LegacyLogsDir is the directory of the kubelet's legacy container log symlinks
	// (LegacyContainerLogsDir on a node; "": none are looked for).
	LegacyLogsDir string
	// Ready, when set, delays Start's first pass until it is closed (the runtime has answered).
	Ready <-chan struct{}
}

// Collector is the container garbage collector. Start runs it; GarbageCollect is one pass. Its methods are
// safe for concurrent use.
type Collector struct {
	runtime   Runtime
	pods      Pods
	clock     clock.WithTicker
	recorder  Recorder
	nodeRef   *corev1.ObjectReference
	policy    Policy
	podLogs   string
	legacyDir string
	ready     <-chan struct{}
	// died carries container deaths to the pod container deletor.
	died chan pleg.Event

	gcMu sync.Mutex // one pass (or one deletor removal) at a time

	// passDone, when set (tests), is called after each pass of Start.
	passDone func(error)
}

// New validates the policy as the kubelet's NewContainerGC does and returns a Collector.
func New(opts Options) (*Collector, error) {
	if opts.Policy.MinAge < 0 {
		return nil, fmt.Errorf("invalid minimum garbage collection age: %v", opts.Policy.MinAge)
	}
	if opts.Runtime == nil || opts.Pods == nil {
		return nil, errors.New("containergc: Options.Runtime and Options.Pods are required")
	}
	c := &Collector{
		runtime: opts.Runtime, pods: opts.Pods, clock: opts.Clock, recorder: opts.Recorder, policy: opts.Policy,
		podLogs: opts.PodLogsDir, legacyDir: opts.LegacyLogsDir, ready: opts.Ready, died: make(chan pleg.Event, deletorBuffer),
		nodeRef: &corev1.ObjectReference{Kind: "Node", Name: opts.NodeName, UID: types.UID(opts.NodeName)},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.podLogs == "" {
		c.podLogs = podconfig.DefaultPodLogsDir
	}
	return c, nil
}

// Start collects at once and then every GCPeriod until ctx ends, and runs the pod container deletor
// (ContainerDied) beside; it never fails (a failed pass is logged
// and recorded as an event). It is a controller-runtime Runnable; the logger comes from ctx.
func (c *Collector) Start(ctx context.Context) error {
	go c.runDeletor(ctx)
	failed := false
	return periodic.Run(ctx, c.clock, c.ready, GCPeriod, periodic.Measured(ctx, "container-gc", func(ctx context.Context) { failed = c.pass(ctx, failed) }))
}

// pass is one period with the kubelet's failure handling: every failure is logged and recorded, the first
// success after a failure is logged at a lower verbosity. It returns whether the pass failed.
func (c *Collector) pass(ctx context.Context, prevFailed bool) bool {
	log := logr.FromContextOrDiscard(ctx)
	err := c.GarbageCollect(ctx)
	if c.passDone != nil {
		defer c.passDone(err)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return prevFailed // stopping: not a failure of the collector
	case err != nil:
		log.Error(err, "Container garbage collection failed")
		if c.recorder != nil {
			c.recorder.Event(c.nodeRef, corev1.EventTypeWarning, ReasonContainerGCFailed, err.Error())
		}
		return true
	case prevFailed:
		log.V(1).Info("Container garbage collection succeeded")
	default:
		log.V(4).Info("Container garbage collection succeeded")
	}
	return false
}

// GarbageCollect is one pass: dead containers, then sandboxes, then log directories (the kubelet's
// containerGC.GarbageCollect with evictNonDeletedPods false). The errors of the three steps are joined.
func (c *Collector) GarbageCollect(ctx context.Context) error {
	return c.collect(ctx, c.policy)
}

// DeleteAllUnusedContainers is the eviction manager's reclaim of disk (the kubelet's GarbageCollect with
// evictNonDeletedPods): one pass in which every pod keeps no dead container beyond those marked keep
// (the newest of each container, for its restart count and previous logs), old enough or not.
func (c *Collector) DeleteAllUnusedContainers(ctx context.Context) error {
	p := c.policy
	p.MaxPerPodContainer, p.MaxContainers = 0, 0
	return c.collect(ctx, p)
}

func (c *Collector) collect(ctx context.Context, p Policy) error {
	c.gcMu.Lock()
	defer c.gcMu.Unlock()
	var errs []error
	if err := c.evictContainers(ctx, p); err != nil {
		errs = append(errs, err)
	}
	withContainers, err := c.evictSandboxes(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	if err := c.evictLogs(ctx, withContainers); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// view is one answer of PodsForGC.
type view struct {
	pods  map[types.UID]bool
	ready bool
}

// podState is what may be removed of a pod.
type podState int

const (
	// podActive: the pod is (or may be) wanted; its newest attempts and sandbox stay.
	podActive podState = iota
	// podBusy: a worker terminates or removes it; nothing is touched.
	podBusy
	// podGone: neither desired nor tracked; everything that does not run goes.
	podGone
)

func (c *Collector) view(ctx context.Context) view {
	pods, ready := c.pods.PodsForGC(ctx)
	return view{pods: pods, ready: ready}
}

func (v view) state(uid types.UID) podState {
	busy, known := v.pods[uid]
	switch {
	case known && busy:
		return podBusy
	case known || !v.ready:
		return podActive
	}
	return podGone
}
