package statusmanager

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podstatus"
)

// readTimeout bounds a read of the mirror pod from the cache, which blocks while the API server is
// unreachable.
const readTimeout = 5 * time.Second

// Manager keeps the status last set for each pod and writes it to the API server. Its methods may be called
// from any goroutine; the syncer sets one pod's status from one goroutine at a time.
type Manager struct {
	client client.Client // nil: no API server (standalone); statuses are kept, never written
	// Clock times the writes (default: the wall clock).
	Clock clock.PassiveClock

	mu   sync.Mutex
	pods map[types.UID]*podEntry
	// syncDuration is kubelet_pod_status_sync_duration_seconds, once registered.
	syncDuration prometheus.Histogram
	// terminated is kubelet_terminated_containers_total, once registered.
	terminated *prometheus.CounterVec
}

// podEntry is what the manager keeps of one pod UID.
type podEntry struct {
	status  *corev1.PodStatus // the status last set
	written *statusWrite      // the last write, nil before the first
	// changedAt is when a status the API does not hold was first set (zero: the API holds the last one).
	changedAt time.Time
}

// New returns a manager that writes through c (reads of mirror pods included); nil c keeps statuses
// without writing them.
func New(c client.Client) *Manager {
	return &Manager{client: c, pods: map[types.UID]*podEntry{}, Clock: clock.RealClock{}}
}

// RegisterMetrics registers kubelet_pod_status_sync_duration_seconds: the time from a change of a pod's
// status to its write to the API server, failed writes in between included.
func (m *Manager) RegisterMetrics(reg prometheus.Registerer) error {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "pod_status_sync_duration_seconds",
		Help: "Duration in seconds to sync a pod status update. Measures time from detection of a change to pod status until the API is " +
			"successfully updated for that pod, even if multiple intevening changes to pod status occur.",
		Buckets: []float64{0.010, 0.050, 0.100, 0.500, 1, 5, 10, 20, 30, 45, 60}})
	if err := reg.Register(h); err != nil {
		return err
	}
	t := prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "terminated_containers_total",
		Help: "Cumulative number of container terminations."}, []string{"container_type", "exit_code", "reason"})
	if err := reg.Register(t); err != nil {
		return err
	}
	m.mu.Lock()
	m.syncDuration, m.terminated = h, t
	m.mu.Unlock()
	return nil
}

// countTerminations counts the containers status has terminated that old (the status set before, nil for
// none) did not, by container type, exit code and reason: each termination once, as the kubelet's status
// manager counts them.
func (m *Manager) countTerminations(old, status *corev1.PodStatus) {
	if m.terminated == nil {
		return
	}
	var before corev1.PodStatus
	if old != nil {
		before = *old
	}
	count := func(olds, news []corev1.ContainerStatus, kind string) {
		for i := range news {
			t := news[i].State.Terminated
			if t == nil {
				continue
			}
			if o := podstatus.FindStatus(olds, news[i].Name); o != nil && o.State.Terminated != nil {
				continue
			}
			m.terminated.WithLabelValues(kind, strconv.Itoa(int(t.ExitCode)), t.Reason).Inc()
		}
	}
	count(before.InitContainerStatuses, status.InitContainerStatuses, "init_container")
	count(before.ContainerStatuses, status.ContainerStatuses, "container")
	count(before.EphemeralContainerStatuses, status.EphemeralContainerStatuses, "ephemeral_container")
}

// changed notes when the pod's status first differed from the API's, and returns that time.
func (m *Manager) changed(uid types.UID) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entryLocked(uid)
	if e.changedAt.IsZero() {
		e.changedAt = m.Clock.Now()
	}
	return e.changedAt
}

// synced observes the time since the change the API now holds.
func (m *Manager) synced(uid types.UID, since time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.pods[uid]; e != nil {
		e.changedAt = time.Time{}
	}
	if m.syncDuration != nil {
		m.syncDuration.Observe(m.Clock.Since(since).Seconds())
	}
}

// Status is the status last set for the pod uid, nil when none was since the agent started (or since
// Forget).
func (m *Manager) Status(uid types.UID) *corev1.PodStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.pods[uid]; e != nil {
		return e.status
	}
	return nil
}

// Keep records status as the status of the pod uid without writing it: a status computed for a decision
// before the sync acts, which the next status builds on (the kubelet's status manager cache).
func (m *Manager) Keep(uid types.UID, status corev1.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entryLocked(uid)
	m.countTerminations(e.status, &status)
	e.status = &status
}

// Result is what SetPodStatus did.
type Result struct {
	// Status is the status set.
	Status corev1.PodStatus
	// Written reports whether it was written to the API now (false: the API already held it, or there is
	// no object to write it to).
	Written bool
}

// SetPodStatus sets the pod's status to what build makes of the status the API holds of the pod — its
// own, or for a static pod its mirror pod's — and writes it when it differs from what the API holds: the
// object's own status, or what the agent last wrote while the object is still the version that write was
// computed against or the one it made. So a status someone else wrote — a forged container ID, a phase —
// is written back at the next sync. Only what the agent owns is compared and patched: conditions others
// own (readiness gates) are never in the patch, so a user's or a controller's condition is never
// overwritten with a stale copy. The patch carries the object's UID as a precondition, so a status never
// lands on a newer pod of the same name. A static pod without a mirror pod, and any pod without an API
// server, has its status kept and not written.
func (m *Manager) SetPodStatus(ctx context.Context, pod *corev1.Pod, build func(api *corev1.PodStatus) corev1.PodStatus) (Result, error) {
	target := m.target(ctx, pod)
	api := &pod.Status
	if target != nil {
		api = &target.Status
	}
	status := build(api)
	m.Keep(pod.UID, status)
	res := Result{Status: status}
	if target == nil {
		return res, nil
	}
	base := m.lastWrite(pod.UID).base(target)
	owned := podstatus.Owned(&status)
	if podstatus.Equal(base, owned) {
		return res, nil
	}
	changedAt := m.changed(pod.UID)
	patch, err := statusPatch(target.UID, base, owned)
	if err != nil {
		return res, err
	}
	obj := &corev1.Pod{}
	obj.Namespace, obj.Name = target.Namespace, target.Name
	if err := m.client.Status().Patch(ctx, obj, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return res, nil // the object is gone; its runtime state is cleaned up as an orphan
		}
		return res, fmt.Errorf("update status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	m.recordWrite(pod.UID, target, obj.ResourceVersion, owned)
	m.synced(pod.UID, changedAt)
	res.Written = true
	return res, nil
}

// Overwritten returns the pods among apiPods (the API's copies) whose status someone else wrote since the
// agent last wrote it. Status-only updates do not make the agent sync a pod by themselves; the caller
// syncs these, so that the agent's status is written back.
func (m *Manager) Overwritten(apiPods []corev1.Pod) []*corev1.Pod {
	m.mu.Lock()
	writes := make(map[types.UID]*statusWrite, len(m.pods))
	for _, e := range m.pods {
		if e.written != nil {
			writes[e.written.uid] = e.written
		}
	}
	m.mu.Unlock()
	var out []*corev1.Pod
	for i := range apiPods {
		if p := &apiPods[i]; writes[p.UID].overwritten(p) {
			out = append(out, p)
		}
	}
	return out
}

// Forget drops what the manager keeps of the pod uid, once nothing of it is left on the node.
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pods, uid)
}

func (m *Manager) entryLocked(uid types.UID) *podEntry {
	e := m.pods[uid]
	if e == nil {
		e = &podEntry{}
		m.pods[uid] = e
	}
	return e
}

func (m *Manager) lastWrite(uid types.UID) *statusWrite {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.pods[uid]; e != nil {
		return e.written
	}
	return nil
}

// recordWrite remembers that the status of pod uid was written to target (at its version then), which
// made version after.
func (m *Manager) recordWrite(uid types.UID, target *corev1.Pod, after string, sent *corev1.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entryLocked(uid)
	e.written = e.written.next(target.UID, target.ResourceVersion, after, sent)
}

// target is the API object that carries the pod's status: the pod itself, or for a static pod its mirror
// pod (nil when there is none yet, or no API server).
func (m *Manager) target(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	if m.client == nil {
		return nil
	}
	if !podrules.IsStaticPod(pod) {
		return pod
	}
	mirror := &corev1.Pod{}
	gctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	if err := m.client.Get(gctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, mirror); err != nil {
		return nil
	}
	if !podrules.IsMirrorOf(mirror, pod) || mirror.DeletionTimestamp != nil {
		return nil
	}
	return mirror
}
