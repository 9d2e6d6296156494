package podlifecycle

import (
	"context"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podstatus"
	"github.com/nodelet/nodelet/podsyncer"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/timeline"
)

// lifecycle is a pod's stage on the node; it only moves forward.
type lifecycle int

const (
	syncing lifecycle = iota
	terminating
	terminated
)

func (l lifecycle) String() string {
	return [...]string{"syncing", "terminating", "terminated"}[l]
}

// podWorker is the agent's memory of one pod UID. Everything in it can be rebuilt from the runtime and
// the API after a restart; it only remembers what the runtime does not say (admission, grace periods,
// waiting reasons, background work in flight).
//
// Who may touch what: a worker is driven by the reconcile of its key, which the workqueue never runs
// twice at once; the fields below without a note belong to that reconcile alone. Other pods' reconciles
// read a worker during their admission (admittedPods), so what admission reads is shared: the state and
// admitted flag are atomics (read them with stage and isAdmitted), and pod is written only under the
// reconciler's mu. Background work (hooks, kills) reaches a worker only through its waiting reasons
// (guarded by the worker's own mu) or by enqueueing its key.
type podWorker struct {
	// PodState is the syncer's memory of the pod (UID, Key, outcome, grace period, waiting reasons).
	*podsyncer.PodState
	// pod is the last desired pod seen (kept after the API object is gone, to terminate it properly).
	// Guarded by the reconciler's mu for writes; the object it points to is never changed.
	pod *corev1.Pod

	// state is a lifecycle, read by other pods' admission: only through stage and setState.
	state atomic.Int32
	// admitted is read by other pods' admission: only through isAdmitted and setAdmitted.
	admitted atomic.Bool
	// orphaned: the pod is no longer desired (its API object or manifest is gone) and is being stopped;
	// like a pod the kubelet's pod manager no longer holds, it no longer counts against the node.
	orphaned atomic.Bool
	// pendingKill is a KillPod not yet taken in by the worker's reconcile (set from other goroutines).
	pendingKill atomic.Pointer[killRequest]
	// syncedAt is when the pod was first synced on the node (for activeDeadlineSeconds); seenAt when the
	// agent first saw it (its source's arrival, else syncedAt).
	syncedAt      time.Time
	seenAt        time.Time
	startObserved bool
}

// stage is the worker's lifecycle now.
func (w *podWorker) stage() lifecycle { return lifecycle(w.state.Load()) }

// setState moves the lifecycle forward only.
func (w *podWorker) setState(s lifecycle) {
	for {
		cur := w.state.Load()
		if int32(s) <= cur || w.state.CompareAndSwap(cur, int32(s)) {
			return
		}
	}
}

// isAdmitted reports whether the pod passed admission (or was found running, which needs none).
func (w *podWorker) isAdmitted() bool { return w.admitted.Load() }

func (w *podWorker) setAdmitted() { w.admitted.Store(true) }

// workersFor returns the workers of every UID known under key: from earlier syncs, from the runtime (a
// restart, or pods left by an earlier run) and the desired pod.
func (r *Reconciler) workersFor(key types.NamespacedName, desired *corev1.Pod) []*podWorker {
	runtimeUIDs := r.pleg.PodUIDs(key.Namespace, key.Name)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, uid := range runtimeUIDs {
		if _, known := r.workers[uid]; !known && (desired == nil || uid != desired.UID) {
			// A pod found in the runtime that no worker knew and nothing desires is stopped with a grace
			// period of 1 s, as the kubelet's housekeeping stops orphaned runtime pods.
			r.ensureWorkerLocked(uid, key).ShortenGrace(1)
			continue
		}
		r.ensureWorkerLocked(uid, key)
	}
	if desired != nil {
		r.ensureWorkerLocked(desired.UID, key)
	}
	var out []*podWorker
	for uid := range r.byKey[key] {
		out = append(out, r.workers[uid])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

func (r *Reconciler) ensureWorkerLocked(uid types.UID, key types.NamespacedName) *podWorker {
	w, ok := r.workers[uid]
	if !ok {
		w = &podWorker{PodState: podsyncer.NewPodState(uid, key)}
		r.workers[uid] = w
		if r.byKey[key] == nil {
			r.byKey[key] = map[types.UID]bool{}
		}
		r.byKey[key][uid] = true
	}
	return w
}

// workerFor returns the worker of the desired pod, remembering the pod.
func (r *Reconciler) workerFor(pod *corev1.Pod) *podWorker {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.ensureWorkerLocked(pod.UID, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
	w.pod = pod.DeepCopy()
	w.orphaned.Store(false) // desired again (a static pod's manifest put back)
	return w
}

// stoppedOrphan is the worker of uid if its stop began because the pod was no longer desired (a static pod's
// manifest taken away, a pod gone from the API), else nil.
func (r *Reconciler) stoppedOrphan(uid types.UID) *podWorker {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.workers[uid]
	if w == nil || !w.orphaned.Load() || w.stage() == syncing {
		return nil
	}
	return w
}

// forget drops a worker whose pod is fully gone.
func (r *Reconciler) forget(w *podWorker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.workers, w.UID)
	if m := r.byKey[w.Key]; m != nil {
		delete(m, w.UID)
		if len(m) == 0 {
			delete(r.byKey, w.Key)
		}
	}
	r.syncer.Forget(w.UID, w.Key)
	r.timeline.Forget(w.UID)
	r.statuses.Forget(w.UID)
	r.alloc.Remove(w.UID)
	r.resizes.retryDue.Store(true)
}

// admittedPods are the pods whose resources count against the node: admitted, desired, not terminated,
// with the resources they were admitted with (a resize not accepted yet does not count).
func (r *Reconciler) admittedPods(except types.UID) []*corev1.Pod {
	r.mu.Lock()
	var out []*corev1.Pod
	for uid, w := range r.workers {
		if uid != except && w.isAdmitted() && w.stage() != terminated && !w.orphaned.Load() && w.pod != nil {
			out = append(out, w.pod)
		}
	}
	r.mu.Unlock()
	for i, p := range out {
		out[i], _ = r.alloc.PodWithAllocation(p)
	}
	return out
}

// admittedOthers are the pods a new pod is admitted beside: the admitted pods, less those the pod sources no
// longer have (a pod force-deleted from the API whose containers still stop), as the kubelet's pod manager drops
// them at once. The API's cache holds every deletion made before the new pod was created, whether or not the
// deleted pod's worker has seen it yet.
func (r *Reconciler) admittedOthers(ctx context.Context, except types.UID) []*corev1.Pod {
	admitted := r.admittedPods(except)
	apiPods, ok := r.apiPods(ctx)
	if !ok || !r.staticSeen() {
		return admitted
	}
	desired := r.desiredUIDs(apiPods)
	return slices.DeleteFunc(admitted, func(p *corev1.Pod) bool { return !desired[p.UID] })
}

// deviceHolders says which pods keep the devices given to them: the pods whose worker has not terminated
// them, and the pods the node has that no worker has looked at yet (after a restart, their devices come from
// the checkpoint until their worker sees them running). nil until every pod source was read: then no pod
// gives its devices up.
func (r *Reconciler) deviceHolders(ctx context.Context) func(types.UID) bool {
	apiPods, ok := r.apiPods(ctx)
	if !ok || !r.staticSeen() {
		return nil
	}
	keep := r.desiredUIDs(apiPods)
	r.mu.Lock()
	for uid, w := range r.workers {
		keep[uid] = w.stage() != terminated
	}
	r.mu.Unlock()
	return func(uid types.UID) bool { return keep[uid] }
}

// AdmittedPods are the pods admitted to the node and not terminated, stopping ones included (the pods the
// kubelet's pod resources API lists), with the resources they were admitted with.
func (r *Reconciler) AdmittedPods() []*corev1.Pod { return r.admittedPods("") }

// desiredPodByUID is the pod of a worker whose pod is still desired, whatever its stage (nil: none).
func (r *Reconciler) desiredPodByUID(uid types.UID) *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.workers[uid]; ok && !w.orphaned.Load() {
		return w.pod
	}
	return nil
}

// syncingPod is the desired pod of a syncing worker (nil: none).
func (r *Reconciler) syncingPod(uid types.UID) *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.workers[uid]; ok && w.stage() == syncing && w.pod != nil {
		return w.pod
	}
	return nil
}

// statusRetry is how soon a pod whose status write failed is synced again.
const statusRetry = time.Second

// pass is what one step of a worker did: the syncer's result and, for a deleted pod whose final status is
// to be written, the removal of its API object after that status.
type pass struct {
	podsyncer.Result
	deleteAfter bool
	// pod is the pod as the step worked with it (its allocated resources), for its status.
	pod *corev1.Pod
	// op is the kind of work the step was, as the kubelet labels kubelet_pod_worker_duration_seconds.
	op string
}

// The operation_type values of kubelet_pod_worker_duration_seconds: the pod's first sync, a later one, a
// step of its termination, and the completion of a terminated pod.
const (
	opCreate     = "create"
	opSync       = "sync"
	opKill       = "kill"
	opTerminated = "terminated"
)

// syncWorker drives the desired pod's worker one step — admission, sync, termination, or finishing — then
// sets the pod's status from what the step left, and removes the API object of a deleted pod whose final
// status is written. It is the one place a pod's status is set from.
func (r *Reconciler) syncWorker(ctx context.Context, w *podWorker, pod *corev1.Pod) (result, string, error) {
	p := r.step(ctx, w, pod)
	res, err := r.finishStep(ctx, w, pod, p)
	return res, p.op, err
}

// finishStep writes the status a step left, and removes the API object of a deleted pod whose final status
// is written.
func (r *Reconciler) finishStep(ctx context.Context, w *podWorker, pod *corev1.Pod, p pass) (result, error) {
	if p.Status == nil {
		return p.Requeue, p.Err
	}
	if p.pod != nil {
		pod = p.pod
	}
	if err := r.writeStatus(ctx, w, pod, p.Status); err != nil {
		// The status waits for the API server, the pod's sync does not (the kubelet's status manager is
		// apart from its pod workers): no error, so no growing back-off, only a retry of the write soon.
		// A static pod may be the API server itself, which cannot come back while its sync waits.
		ctrl.LoggerFrom(ctx).Error(err, "Failed to update the pod's status, will retry")
		p.Requeue.RequeueAfter(statusRetry)
		return p.Requeue, p.Err
	}
	if p.deleteAfter && p.Err == nil {
		return p.Requeue, r.finishDeletion(ctx, w, pod)
	}
	return p.Requeue, p.Err
}

// step is one step of the desired pod's worker: admission on its first sync, then the syncer's SyncPod
// while the pod runs, SyncTerminatingPod until its containers have stopped, and SyncTerminatedPod.
func (r *Reconciler) step(ctx context.Context, w *podWorker, pod *corev1.Pod) pass {
	op := w.syncOp()
	status, gen, err := r.syncer.ReadPod(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return pass{Result: podsyncer.Result{Err: err}, op: op}
	}
	w.applyKillRequest()
	if w.stage() == syncing && !w.isAdmitted() {
		if rejected := r.admitPod(ctx, w, pod, status); rejected {
			return pass{Result: podsyncer.Result{Status: status}, op: op}
		}
	}
	if w.stage() == syncing && r.shouldTerminate(ctx, w, pod) {
		w.setState(terminating)
	}
	if w.stage() == syncing {
		pod = r.resizes.allocatedPod(ctx, pod)
	} else {
		r.alloc.ClearConditions(pod.UID) // a stopping pod is not resized
	}
	sc := &podsyncer.Scope{Pod: pod, State: w.PodState, Runtime: status, Gen: gen}
	if w.stage() == syncing {
		sctx, span := r.startSpan(ctx, "syncPod", pod)
		res := r.syncer.SyncPod(sctx, sc)
		endSpan(span, res.Err)
		r.resizes.report(ctx, pod, res.Resize)
		if res.Terminate {
			w.setState(terminating)
			r.enqueue(w.Key)
		} else if res.Err == nil {
			if left := w.deadlineLeft(r.clock.Now(), pod); left >= 0 {
				res.Requeue.RequeueAfter(max(left, time.Millisecond))
			}
		}
		return pass{Result: res, pod: pod, op: op}
	}
	if w.stage() == terminating {
		sctx, span := r.startSpan(ctx, "syncTerminatingPod", pod)
		res := r.syncer.SyncTerminatingPod(sctx, sc)
		endSpan(span, res.Err)
		if !res.Stopped {
			return pass{Result: res, op: opKill}
		}
		w.setState(terminated)
		r.resizes.retryDue.Store(true) // its room is free
	}
	sctx, span := r.startSpan(ctx, "syncTerminatedPod", pod)
	res := r.syncer.SyncTerminatedPod(sctx, sc)
	endSpan(span, res.Err)
	return pass{Result: res, deleteAfter: res.Err == nil && pod.DeletionTimestamp != nil, op: opTerminated}
}

// syncOp is the operation_type of the worker's sync: create until its first sync, sync after.
func (w *podWorker) syncOp() string {
	if w.syncedAt.IsZero() {
		return opCreate
	}
	return opSync
}

// shouldTerminate reports whether a syncing pod must stop: it is being deleted, its phase is terminal,
// or the agent decided its fate (activeDeadlineSeconds).
func (r *Reconciler) shouldTerminate(_ context.Context, w *podWorker, pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || podrules.IsTerminalPhase(pod.Status.Phase) || w.Outcome() != nil {
		return true
	}
	if w.deadlineLeft(r.clock.Now(), pod) != 0 {
		return false
	}
	const msg = "Pod was active on the node longer than the specified deadline"
	w.SetOutcome(podstatus.Override{Phase: corev1.PodFailed, Reason: "DeadlineExceeded", Message: msg})
	r.recorder.Event(podsyncer.PodRef(pod), corev1.EventTypeNormal, "DeadlineExceeded", msg)
	return true
}

// deadlineLeft is how long the pod may still be active on the node under activeDeadlineSeconds, counted
// from its start (status.startTime, else its first sync here): -1 without a deadline (or before its first
// sync), 0 once it is exceeded.
func (w *podWorker) deadlineLeft(now time.Time, pod *corev1.Pod) time.Duration {
	if pod.Spec.ActiveDeadlineSeconds == nil {
		return -1
	}
	start := w.syncedAt
	if pod.Status.StartTime != nil {
		start = pod.Status.StartTime.Time
	}
	if start.IsZero() {
		return -1
	}
	return max(time.Duration(*pod.Spec.ActiveDeadlineSeconds)*time.Second-now.Sub(start), 0)
}

// admitPod admits a pod on its first sync. A pod the runtime already runs (an agent restart) and a pod
// already in a terminal phase are not checked again. A pod in a terminal phase is known terminated only
// when nothing of it runs either (the kubelet's check of its runtime cache): a terminal phase that someone
// else wrote while its containers ran is a reason to stop them — preStop hooks and grace period
// included — not a sign that they were stopped. It returns true when the pod was rejected.
func (r *Reconciler) admitPod(ctx context.Context, w *podWorker, pod *corev1.Pod, status *runtime.PodStatus) bool {
	if w.syncedAt.IsZero() {
		w.syncedAt = r.clock.Now()
		w.seenAt = w.syncedAt
		if at, ok := r.seen.take(pod); ok {
			w.seenAt = at
			r.metrics.workerStart.Observe(w.syncedAt.Sub(at).Seconds())
		}
		r.metrics.containersPerPod.Observe(float64(len(pod.Spec.Containers)))
	}
	if podrules.IsTerminalPhase(pod.Status.Phase) && !status.Active() {
		w.setState(terminated)
		return false
	}
	r.alloc.Restore(pod)
	if len(status.Sandboxes) > 0 || len(status.Containers) > 0 {
		w.setAdmitted()
		return false
	}
	node, err := r.node(ctx)
	if err != nil {
		node = nil // unknown (standalone, or the API server is away): admitted without its resources and labels
	}
	r.admitMu.Lock()
	defer r.admitMu.Unlock()
	res := r.admitOthers(pod)
	if res.admit {
		res = runAdmitHandlers(ctx, pod, node, r.admittedOthers(ctx, pod.UID), r.sysctls, r.devices, r.deviceHolders(ctx))
	}
	if res.admit {
		w.setAdmitted()
		r.timeline.Mark(pod, timeline.Admitted, "")
		return false
	}
	r.syncer.Reject(w.PodState, pod, res.reason, res.message)
	w.setState(terminated)
	w.NothingToTearDown()
	return true
}
