package podsyncer

import (
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podstatus"
	"github.com/nodelet/nodelet/runtime"
)

// Scope is one pod as one sync sees it: the desired pod, the syncer's memory of it, its runtime state and
// where the pod is in its life. The pod's worker builds it for each sync; the phases of a sync read it and
// update Runtime with what their own actions created.
type Scope struct {
	// Pod is the desired pod (nil for a pod only the runtime knows).
	Pod *corev1.Pod
	// State is what the syncer remembers of the pod UID between syncs.
	State *PodState
	// Runtime is the pod's runtime state, of the PLEG cache's generation Gen.
	Runtime *runtime.PodStatus
	Gen     uint64
	// Terminating and Terminated are the pod's stage in its worker: its status is that of a pod that
	// stops, or has stopped for good.
	Terminating, Terminated bool
	// ResizeConditions are the pod's resize conditions its worker keeps, for its status.
	ResizeConditions []corev1.PodCondition
}

// Result is what a sync did: when to look at the pod again, what failed, and the runtime state its status
// is to be computed from (nil: no status this time — the sync failed before it knew the pod's state, or
// waits for work in flight to report).
type Result struct {
	Requeue Requeue
	Err     error
	Status  *runtime.PodStatus
	// Terminate (SyncPod): the pod is to stop now — its containers finished for good, or it was rejected.
	Terminate bool
	// Stopped (SyncTerminatingPod): no container of the pod runs and no stop is in flight.
	Stopped bool
	// Resize (SyncPod) is where the pod's in-place resize stands (nil: the sync did not get that far).
	Resize *ResizeReport
}

// Requeue is when a pod wants to be looked at again (0: no need).
type Requeue struct{ After time.Duration }

// Merge keeps the sooner of two requeues.
func (r *Requeue) Merge(o Requeue) {
	if o.After > 0 && (r.After == 0 || o.After < r.After) {
		r.After = o.After
	}
}

// RequeueAfter asks to look again after d at the latest.
func (r *Requeue) RequeueAfter(d time.Duration) { r.Merge(Requeue{After: d}) }

// PodState is the syncer's memory of one pod UID between syncs: what the runtime does not say — the
// outcome the agent decided, the grace period, why containers wait, the stop in flight. Everything in it
// can be rebuilt after a restart. A sync of the pod (its worker's, never two at once) owns it; background
// work (hooks, stops) reaches it only through the waiting reasons, which its mu guards.
type PodState struct {
	UID types.UID
	Key types.NamespacedName

	// outcome is the status the agent decided (an eviction, a deadline, a rejection).
	outcome *podstatus.Override
	// Termination: grace only shrinks; kill is the stop in flight.
	gracePeriod      int64
	terminatingSince time.Time
	kill             *killOp
	tornDown         bool
	// podCgroup is what was last written to the pod's cgroup (nil: not known since the agent started).
	podCgroup *podrules.PodCgroup
	// usernsStarting is set from a user namespaced pod's sandbox creation until its containers first started
	// or something failed on the way (the kubelet counts that as one error of the pod's start).
	usernsStarting bool

	mu          sync.Mutex                   // guards waiting
	waiting     map[string]podstatus.Waiting // why containers wait, by name (background work sets it too)
	mountErrors map[string]bool
}

// NewPodState is the memory of a pod UID the syncer has not seen yet.
func NewPodState(uid types.UID, key types.NamespacedName) *PodState {
	return &PodState{UID: uid, Key: key, gracePeriod: -1, waiting: map[string]podstatus.Waiting{}}
}

// Outcome is the status the agent decided for the pod, or nil.
func (ps *PodState) Outcome() *podstatus.Override { return ps.outcome }

// SetOutcome decides the pod's final status (an eviction, activeDeadlineSeconds).
func (ps *PodState) SetOutcome(o podstatus.Override) { ps.outcome = &o }

// ShortenGrace makes the pod's grace period g seconds (at least 1) unless it is already shorter.
func (ps *PodState) ShortenGrace(g int64) {
	if ps.gracePeriod < 0 || g < ps.gracePeriod {
		ps.gracePeriod = max(g, 1)
	}
}

// Stopping reports whether a stop of the pod's containers runs in the background.
func (ps *PodState) Stopping() bool { return ps.kill != nil && !ps.kill.finished() }

// NothingToTearDown records that the pod never ran on the node (rejected at admission): its termination
// has no sandbox or volume to tear down.
func (ps *PodState) NothingToTearDown() { ps.tornDown = true }

// setWaiting records why container name waits.
func (ps *PodState) setWaiting(name string, wt podstatus.Waiting) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.waiting[name] = wt
}

// clearWaiting forgets why container name waited.
func (ps *PodState) clearWaiting(name string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.waiting, name)
}

// waitingSnapshot is a copy of why containers wait.
func (ps *PodState) waitingSnapshot() map[string]podstatus.Waiting {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return maps.Clone(ps.waiting)
}
