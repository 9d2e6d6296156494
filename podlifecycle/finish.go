package podlifecycle

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/podsyncer"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/timeline"
)

// writeStatus computes the pod's status from the runtime state st a step left and sets it with the status
// manager, which writes it when the API does not hold it yet.
func (r *Reconciler) writeStatus(ctx context.Context, w *podWorker, pod *corev1.Pod, st *runtime.PodStatus) error {
	sc := &podsyncer.Scope{Pod: pod, State: w.PodState, Runtime: st,
		Terminating: w.stage() >= terminating, Terminated: w.stage() == terminated,
		ResizeConditions: r.alloc.Conditions(pod.UID)}
	res, err := r.statuses.SetPodStatus(ctx, pod, func(api *corev1.PodStatus) corev1.PodStatus {
		return r.syncer.PodStatus(ctx, sc, api)
	})
	if res.Written {
		if podReady(&res.Status) {
			r.timeline.Mark(pod, timeline.Ready, "")
		}
		if w.startedNow(&res.Status) {
			sinceCreation := r.clock.Since(pod.CreationTimestamp.Time).Seconds()
			r.metrics.startSLI.Observe(sinceCreation)
			r.metrics.startTotal.Observe(sinceCreation)
			if !w.seenAt.IsZero() {
				r.metrics.startDuration.Observe(r.clock.Since(w.seenAt).Seconds())
			}
		}
		ctrl.LoggerFrom(ctx).V(2).Info("Pod status written", "phase", res.Status.Phase)
	}
	return err
}

// podReady says whether the status has the Ready condition true.
func podReady(st *corev1.PodStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// terminateOrphan stops and removes a UID that is not (or no longer) desired under its name: a pod
// force-deleted from the API, a name reused with a new UID, or a pod left by an earlier run. It returns
// true once nothing of it is left in the runtime.
func (r *Reconciler) terminateOrphan(ctx context.Context, w *podWorker) (bool, result) {
	log := ctrl.LoggerFrom(ctx).WithValues("podUID", w.UID)
	w.orphaned.Store(true)
	st, _, err := r.syncer.ReadPod(ctx, w.UID, w.Key.Name, w.Key.Namespace)
	if err != nil {
		log.Error(err, "Failed to read the runtime state of an orphaned pod")
		return false, result{After: time.Second}
	}
	w.setState(terminating)
	sc := &podsyncer.Scope{Pod: w.pod, State: w.PodState, Runtime: st}
	res := r.syncer.SyncTerminatingPod(ctx, sc)
	if res.Err != nil {
		log.Error(res.Err, "Failed to stop an orphaned pod")
		return false, result{After: time.Second}
	}
	if !res.Stopped {
		return false, result{}
	}
	w.setState(terminated)
	if err := r.syncer.TearDown(ctx, sc); err != nil {
		log.Error(err, "Failed to tear down an orphaned pod")
		return false, result{After: time.Second}
	}
	if err := r.syncer.RemovePod(ctx, sc); err != nil {
		log.Error(err, "Failed to remove an orphaned pod")
		return false, result{After: time.Second}
	}
	log.Info("Removed pod that is no longer desired")
	r.forget(w)
	return true, result{}
}

// finishDeletion removes what the runtime holds and then the API object, with grace 0 and a UID
// precondition so a new pod under the same name is never deleted by mistake.
func (r *Reconciler) finishDeletion(ctx context.Context, w *podWorker, pod *corev1.Pod) error {
	st, _, err := r.syncer.ReadPod(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return err
	}
	if err := r.syncer.RemovePod(ctx, &podsyncer.Scope{Pod: pod, State: w.PodState, Runtime: st}); err != nil {
		return err
	}
	// Its claims are released before the API object goes: the claim's deallocation waits for that.
	if r.dra.MightNeedToUnprepare(pod.UID) {
		return fmt.Errorf("pod %s/%s still holds prepared ResourceClaims", pod.Namespace, pod.Name)
	}
	err = r.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: ptr.To(pod.UID)})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Pod deleted from the API after termination")
	r.forget(w)
	return nil
}
