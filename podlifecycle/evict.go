package podlifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podstatus"
	"github.com/nodelet/nodelet/podsyncer"
)

// PodAdmitter is an admission handler besides the reconciler's own (the eviction manager's): it admits
// the pod or says why not.
type PodAdmitter interface {
	Admit(pod *corev1.Pod) (ok bool, reason, message string)
}

// killRequest is a stop the agent decided (an eviction), waiting for the pod's next reconcile.
type killRequest struct {
	grace   int64
	outcome podstatus.Override
}

// ActivePods are the pods the node runs that are admitted and neither terminating nor terminated (the
// kubelet's GetActivePods): the eviction manager's candidates.
func (r *Reconciler) ActivePods() []*corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*corev1.Pod
	for _, w := range r.workers {
		if w.isAdmitted() && w.stage() == syncing && w.pod != nil && w.pendingKill.Load() == nil &&
			w.pod.DeletionTimestamp == nil && !podrules.IsTerminalPhase(w.pod.Status.Phase) {
			out = append(out, w.pod)
		}
	}
	return out
}

// KillPod stops the pod within gracePeriod seconds at most (the grace period only shrinks) and makes its
// final status Failed with reason, message and condition (the kubelet's killPodNow with a status
// function, as the eviction manager calls it). It returns at once: the pod's reconcile does the work.
func (r *Reconciler) KillPod(pod *corev1.Pod, gracePeriod int64, reason, message string, condition *corev1.PodCondition) {
	r.mu.Lock()
	w, ok := r.workers[pod.UID]
	r.mu.Unlock()
	if !ok {
		return
	}
	w.pendingKill.Store(&killRequest{grace: gracePeriod,
		outcome: podstatus.Override{Phase: corev1.PodFailed, Reason: reason, Message: message, Condition: condition}})
	r.enqueue(w.Key)
	// The kubelet's killPodNow waits one and a half grace periods (10 s at least) for the kill, then gives up
	// with an ExceededGracePeriod event; the pod keeps being stopped either way.
	ref := podsyncer.PodRef(pod)
	timer := r.clock.NewTimer(killTimeout(gracePeriod))
	go func() {
		defer timer.Stop()
		<-timer.C()
		if w.stage() != terminated && r.recorder != nil {
			r.recorder.Event(ref, corev1.EventTypeWarning, eventExceededGracePeriod,
				"Container runtime did not kill the pod within specified grace period.")
		}
	}()
}

// eventExceededGracePeriod is the kubelet's event of a pod that a kill did not stop in time.
const eventExceededGracePeriod = "ExceededGracePeriod"

// killTimeout is how long the kubelet waits for a kill of the given grace period: 1.5 times it, 10 s at least.
func killTimeout(gracePeriod int64) time.Duration {
	return time.Duration(max(gracePeriod+gracePeriod/2, 10)) * time.Second
}

// PodCleanedUp reports whether nothing of the pod runs any more: its worker is gone or terminated.
func (r *Reconciler) PodCleanedUp(uid types.UID) bool {
	r.mu.Lock()
	w, ok := r.workers[uid]
	r.mu.Unlock()
	return !ok || w.stage() == terminated
}

// applyKillRequest takes a pending KillPod into the worker (its reconcile alone touches the worker): a
// syncing pod gets the outcome and starts terminating; a terminating one only a shorter grace period.
func (w *podWorker) applyKillRequest() {
	req := w.pendingKill.Swap(nil)
	if req == nil || w.stage() == terminated {
		return
	}
	w.ShortenGrace(req.grace)
	if w.stage() == syncing {
		w.SetOutcome(req.outcome)
		w.setState(terminating)
	}
}

// admitOthers runs the other admission handlers in order; the first refusal wins.
func (r *Reconciler) admitOthers(pod *corev1.Pod) admissionResult {
	for _, a := range r.admitters {
		if ok, reason, msg := a.Admit(pod); !ok {
			return admissionResult{reason: reason, message: msg}
		}
	}
	return admissionResult{admit: true}
}
