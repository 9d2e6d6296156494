package eviction

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/periodic"
	"github.com/nodelet/nodelet/podrules"
)

// The kubelet's timings.
const (
	// DefaultMonitoringInterval is how often the signals are observed (the kubelet's evictionMonitoringPeriod).
	DefaultMonitoringInterval = 10 * time.Second
	// hardEvictionGracePeriod is the grace period of a pod evicted for a hard threshold, in seconds.
	hardEvictionGracePeriod = 1
	// podCleanupTimeout and podCleanupPoll bound the wait for an evicted pod's resources to be reclaimed.
	podCleanupTimeout = 30 * time.Second
	podCleanupPoll    = time.Second
	// notifierRefreshInterval is how often the memory threshold notifier's threshold is recomputed.
	notifierRefreshInterval = 10 * time.Second
)

// SummaryProvider gives the node's stats summary (the node API's /stats/summary) in its two parts: the
// node's figures, and the running pods'.
type SummaryProvider interface {
	NodeSummary(ctx context.Context) (*statsapi.Summary, error)
	PodSummaries(ctx context.Context) ([]statsapi.PodStats, error)
}

// Pods is what the manager asks of the pod workers.
type Pods interface {
	// ActivePods are the admitted pods that are not terminating or terminated: the eviction candidates.
	ActivePods() []*corev1.Pod
	// KillPod stops pod within gracePeriod seconds at most and makes its final status Failed with reason and
	// message, and condition; it returns at once.
	KillPod(pod *corev1.Pod, gracePeriod int64, reason, message string, condition *corev1.PodCondition)
	// PodCleanedUp reports whether nothing of the pod is left running on the node.
	PodCleanedUp(uid types.UID) bool
}

// ImageGC removes the images no container uses (imagegc.Manager).
type ImageGC interface {
	DeleteUnusedImages(ctx context.Context) error
}

// ContainerGC removes the dead containers and sandboxes nothing needs (containergc.Collector).
type ContainerGC interface {
	DeleteAllUnusedContainers(ctx context.Context) error
}

// DiskInfo tells whether the runtime's image filesystem is another filesystem than nodefs.
type DiskInfo interface {
	HasDedicatedImageFs(ctx context.Context) (bool, error)
}

// EventRecorder records events (client-go's record.EventRecorder).
type EventRecorder interface {
	Eventf(object apiruntime.Object, eventtype, reason, messageFmt string, args ...any)
	AnnotatedEventf(object apiruntime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any)
}

// Options configure a Manager.
type Options struct {
	NodeName   string
	Thresholds []Threshold
	// PressureTransitionPeriod: a node condition stays true this long after its last threshold was met.
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriodSeconds bounds the grace period of a pod evicted for a soft threshold.
	MaxPodGracePeriodSeconds int64
	// MonitoringInterval is how often the signals are observed (default DefaultMonitoringInterval).
	MonitoringInterval time.Duration
	// MemoryCgroup, when set, is the root memory cgroup directory (cgroup v1) on which a threshold
	// notification wakes the manager as soon as memory.available crosses a memory threshold
	// (kernelMemcgNotification).
	MemoryCgroup string
	// LocalStorageCapacityIsolation (localStorageCapacityIsolation) enforces, on every pass before the
	// thresholds, emptyDir sizeLimits and the pods' and containers' ephemeral-storage limits.
	LocalStorageCapacityIsolation bool
}

// Deps are the Manager's collaborators. Stats, Pods and Clock are required; ImageGC and ContainerGC
// reclaim disk before pods are evicted for it when set; DiskInfo, Recorder and Metrics are optional.
type Deps struct {
	Stats       SummaryProvider
	Pods        Pods
	ImageGC     ImageGC
	ContainerGC ContainerGC
	// DiskInfo, when set, says whether the image filesystem is dedicated (default: it is nodefs).
	DiskInfo DiskInfo
	Recorder EventRecorder
	Clock    clock.WithTicker
	Metrics  prometheus.Registerer
}

// Manager is the kubelet's eviction manager.
type Manager struct {
	opts    Options
	deps    Deps
	metrics *metrics
	wake    chan struct{}

	mu              sync.RWMutex
	conditions      []corev1.NodeConditionType
	firstObservedAt map[string]time.Time
	lastObservedAt  map[corev1.NodeConditionType]time.Time
	thresholdsMet   []Threshold
	lastObs         observations

	// dedicated caches DiskInfo's answer (the control loop's alone).
	dedicated *bool

	notifier         *memcgNotifier
	notifierUpdated  time.Time
	notifierDisabled bool
}

// New builds a manager.
func New(opts Options, deps Deps) (*Manager, error) {
	if deps.Stats == nil || deps.Pods == nil || deps.Clock == nil {
		return nil, errors.New("eviction: Stats, Pods and Clock are required")
	}
	if opts.MonitoringInterval <= 0 {
		opts.MonitoringInterval = DefaultMonitoringInterval
	}
	m, err := newMetrics(deps.Metrics)
	if err != nil {
		return nil, err
	}
	return &Manager{opts: opts, deps: deps, metrics: m, wake: make(chan struct{}, 1)}, nil
}

// NodeConditions are the pressure conditions the node reports now (MemoryPressure, DiskPressure,
// PIDPressure), held for the pressure transition period after their thresholds stop being met.
func (m *Manager) NodeConditions() []corev1.NodeConditionType {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return append([]corev1.NodeConditionType(nil), m.conditions...)
}

// Admit is the kubelet's eviction admission: under any pressure only critical pods are admitted, except
// that under memory pressure alone every pod but a BestEffort one is, and a BestEffort one that tolerates
// the memory-pressure taint. A rejected pod fails with reason Evicted.
func (m *Manager) Admit(pod *corev1.Pod) (ok bool, reason, msg string) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if len(m.conditions) == 0 || podrules.IsCriticalPod(pod) {
		return true, "", ""
	}
	if len(m.conditions) == 1 && m.conditions[0] == corev1.NodeMemoryPressure {
		if podrules.GetPodQOS(pod) != corev1.PodQOSBestEffort {
			return true, "", ""
		}
		taint := &corev1.Taint{Key: corev1.TaintNodeMemoryPressure, Effect: corev1.TaintEffectNoSchedule}
		for i := range pod.Spec.Tolerations {
			if pod.Spec.Tolerations[i].ToleratesTaint(logr.Discard(), taint, false) {
				return true, "", ""
			}
		}
	}
	return false, Reason, fmt.Sprintf("The node had condition: %v. ", m.conditions)
}

// Start runs the control loop until ctx ends: a pass every MonitoringInterval, or at once when the memory
// threshold notifier fires; after an eviction it waits (30 s at most) until the pods are cleaned up.
func (m *Manager) Start(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx).WithName("eviction")
	ctx = logr.NewContext(ctx, log)
	log.Info("Eviction manager: starting control loop", "thresholds", len(m.opts.Thresholds),
		"localStorageCapacityIsolation", m.opts.LocalStorageCapacityIsolation)
	defer m.stopNotifier()
	var evicted []*corev1.Pod
	sync := periodic.Measured(ctx, "eviction", func(ctx context.Context) {
		var err error
		if evicted, err = m.synchronize(ctx); err != nil {
			log.Error(err, "Eviction manager: failed to synchronize")
		}
	})
	for {
		sync(ctx)
		if len(evicted) > 0 {
			log.Info("Eviction manager: pods evicted, waiting for pod to be cleaned up", "pods", podNames(evicted))
			m.waitForCleanup(ctx, evicted)
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		t := m.deps.Clock.NewTimer(m.opts.MonitoringInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		case <-m.wake:
			t.Stop()
			log.Info("Eviction manager: memory threshold crossed")
		}
	}
}

func klogRef(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// waitForCleanup polls every second, for 30 s at most, until every evicted pod is cleaned up.
func (m *Manager) waitForCleanup(ctx context.Context, pods []*corev1.Pod) {
	log := logr.FromContextOrDiscard(ctx)
	if periodic.Until(ctx, m.deps.Clock, podCleanupPoll, podCleanupTimeout, func() bool { return m.cleanedUp(pods) }) {
		log.Info("Eviction manager: pods successfully cleaned up", "pods", podNames(pods))
	} else if ctx.Err() == nil {
		log.Info("Eviction manager: timed out waiting for pods to be cleaned up", "pods", podNames(pods))
	}
}

// cleanedUp reports whether nothing of any of the pods is left running.
func (m *Manager) cleanedUp(pods []*corev1.Pod) bool {
	for _, p := range pods {
		if !m.deps.Pods.PodCleanedUp(p.UID) {
			return false
		}
	}
	return true
}
