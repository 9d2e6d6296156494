package allocation

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
)

// The PodResizePending condition's reasons.
const (
	// ReasonDeferred: the node has not the room for the resize now; it is retried as pods leave.
	ReasonDeferred = corev1.PodReasonDeferred
	// ReasonInfeasible: the node cannot ever do this resize; it waits for the spec to change.
	ReasonInfeasible = corev1.PodReasonInfeasible
	// ReasonError is the PodResizeInProgress condition's reason when applying the resize failed.
	ReasonError = corev1.PodReasonError
)

// resizeConditions are a pod's resize conditions (nil: not set).
type resizeConditions struct {
	pending, inProgress *corev1.PodCondition
}

func (m *Manager) conditionsLocked(uid types.UID) *resizeConditions {
	rc, ok := m.resizes[uid]
	if !ok {
		rc = &resizeConditions{}
		m.resizes[uid] = rc
	}
	return rc
}

// updated is the condition of type t after a set: its transition time moves when it is new or its reason
// changes, as the kubelet's status manager keeps it.
func updated(t corev1.PodConditionType, old *corev1.PodCondition, reason, message string, generation int64, now time.Time) *corev1.PodCondition {
	c := &corev1.PodCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message, ObservedGeneration: generation,
		LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
	}
	if old != nil && old.Reason == reason {
		c.LastTransitionTime = old.LastTransitionTime
		if old.Message == message && old.ObservedGeneration == generation {
			c.LastProbeTime = old.LastProbeTime
		}
	}
	return c
}

// SetPending sets PodResizePending (a reason other than Infeasible is Deferred, as the kubelet reports
// every refusal but its resize checks) and queues a deferred resize for retries. changed is true when the
// condition is new or its reason or generation changed — when the kubelet records an event.
func (m *Manager) SetPending(uid types.UID, reason, message string, generation int64, now time.Time) (changed bool) {
	if reason != ReasonInfeasible {
		reason = ReasonDeferred
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rc := m.conditionsLocked(uid)
	old := rc.pending
	rc.pending = updated(corev1.PodResizePending, old, reason, message, generation, now)
	m.dropPendingLocked(uid)
	if reason == ReasonDeferred {
		m.pending = append(m.pending, uid)
	}
	return old == nil || old.Reason != reason || old.ObservedGeneration != generation
}

// ClearPending removes PodResizePending (the resize was accepted, or the spec went back to the
// allocation) and the pod from the retry queue.
func (m *Manager) ClearPending(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rc, ok := m.resizes[uid]; ok {
		rc.pending = nil
	}
	m.dropPendingLocked(uid)
}

// Pending is the pod's PodResizePending condition, if set.
func (m *Manager) Pending(uid types.UID) *corev1.PodCondition {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rc, ok := m.resizes[uid]; ok && rc.pending != nil {
		return rc.pending.DeepCopy()
	}
	return nil
}

func (m *Manager) dropPendingLocked(uid types.UID) {
	m.pending = slices.DeleteFunc(m.pending, func(u types.UID) bool { return u == uid })
}

// StartInProgress sets a fresh PodResizeInProgress for an accepted resize of the pod's generation (an
// earlier one, with its error, is replaced).
func (m *Manager) StartInProgress(uid types.UID, generation int64, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rc := m.conditionsLocked(uid)
	rc.inProgress = updated(corev1.PodResizeInProgress, nil, "", "", generation, now)
}

// KeepInProgress keeps PodResizeInProgress set while a resize is being applied: an existing condition
// keeps its reason, message and generation; a missing one (a restart) is set for generation.
func (m *Manager) KeepInProgress(uid types.UID, generation int64, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rc := m.conditionsLocked(uid)
	if rc.inProgress == nil {
		rc.inProgress = updated(corev1.PodResizeInProgress, nil, "", "", generation, now)
	}
}

// InProgressError marks PodResizeInProgress with reason Error and the failure's message, keeping its
// generation. changed is true when reason or message changed (the kubelet's ResizeError event).
func (m *Manager) InProgressError(uid types.UID, message string, generation int64, now time.Time) (changed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rc := m.conditionsLocked(uid)
	old := rc.inProgress
	if old != nil {
		generation = old.ObservedGeneration
	}
	rc.inProgress = updated(corev1.PodResizeInProgress, old, ReasonError, message, generation, now)
	return old == nil || old.Reason != ReasonError || old.Message != message
}

// ClearInProgress removes PodResizeInProgress once the resize is applied; it returns the generation the
// condition observed and whether there was one (the kubelet's ResizeCompleted event).
func (m *Manager) ClearInProgress(uid types.UID) (generation int64, was bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rc, ok := m.resizes[uid]
	if !ok || rc.inProgress == nil {
		return 0, false
	}
	generation = rc.inProgress.ObservedGeneration
	rc.inProgress = nil
	return generation, true
}

// ClearConditions removes both conditions (a pod that reached a terminal phase).
func (m *Manager) ClearConditions(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.resizes, uid)
	m.dropPendingLocked(uid)
}

// Conditions are the pod's resize conditions for its status: PodResizePending, then PodResizeInProgress.
func (m *Manager) Conditions(uid types.UID) []corev1.PodCondition {
	m.mu.Lock()
	defer m.mu.Unlock()
	rc, ok := m.resizes[uid]
	if !ok {
		return nil
	}
	var out []corev1.PodCondition
	for _, c := range []*corev1.PodCondition{rc.pending, rc.inProgress} {
		if c != nil {
			out = append(out, *c.DeepCopy())
		}
	}
	return out
}

// Restore takes the resize conditions a pod's API status holds (an agent restart or a takeover), unless
// they are known already.
func (m *Manager) Restore(pod *corev1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.resizes[pod.UID]; ok {
		return
	}
	rc := &resizeConditions{}
	for i := range pod.Status.Conditions {
		c := pod.Status.Conditions[i]
		switch c.Type {
		case corev1.PodResizePending:
			rc.pending = c.DeepCopy()
			if c.Reason == ReasonDeferred {
				m.pending = append(m.pending, pod.UID)
			}
		case corev1.PodResizeInProgress:
			rc.inProgress = c.DeepCopy()
		}
	}
	m.resizes[pod.UID] = rc
}

// PendingResizes are the deferred resizes in the order the kubelet retries them: those that do not grow
// the pod's cpu or memory requests first, then higher priority, Guaranteed pods, and the longest waiting.
// podOf looks a pod up (nil: gone; it is left out).
func (m *Manager) PendingResizes(podOf func(types.UID) *corev1.Pod) []*corev1.Pod {
	m.mu.Lock()
	type entry struct {
		pod      *corev1.Pod
		growing  bool
		waitedAt *metav1.Time
	}
	var es []entry
	for _, uid := range m.pending {
		pod := podOf(uid)
		if pod == nil {
			continue
		}
		e := entry{pod: pod}
		if alloc, ok := m.allocated.entries[uid]; ok {
			allocated, _ := withResources(pod, alloc)
			e.growing = growsRequests(allocated, pod)
		}
		if rc := m.resizes[uid]; rc != nil && rc.pending != nil {
			e.waitedAt = &rc.pending.LastTransitionTime
		}
		es = append(es, e)
	}
	m.mu.Unlock()
	slices.SortStableFunc(es, func(a, b entry) int {
		if a.growing != b.growing {
			return boolOrder(!a.growing, !b.growing)
		}
		if pa, pb := podrules.PodPriority(a.pod), podrules.PodPriority(b.pod); pa != pb {
			return boolOrder(pa > pb, pb > pa)
		}
		ga, gb := podrules.GetPodQOS(a.pod) == corev1.PodQOSGuaranteed, podrules.GetPodQOS(b.pod) == corev1.PodQOSGuaranteed
		if ga != gb {
			return boolOrder(ga, gb)
		}
		switch {
		case a.waitedAt == nil && b.waitedAt == nil:
			return 0
		case a.waitedAt == nil:
			return 1
		case b.waitedAt == nil:
			return -1
		}
		return a.waitedAt.Compare(b.waitedAt.Time)
	})
	out := make([]*corev1.Pod, len(es))
	for i, e := range es {
		out[i] = e.pod
	}
	return out
}

// boolOrder sorts the entry for which first holds before the other.
func boolOrder(first, second bool) int {
	switch {
	case first && !second:
		return -1
	case second && !first:
		return 1
	}
	return 0
}

// growsRequests reports whether the desired pod asks for more cpu or memory than the allocated one.
func growsRequests(allocated, desired *corev1.Pod) bool {
	a := podrules.PodRequests(allocated, podrules.ResourceOptions{})
	d := podrules.PodRequests(desired, podrules.ResourceOptions{})
	return d.Cpu().Cmp(*a.Cpu()) > 0 || d.Memory().Cmp(*a.Memory()) > 0
}
