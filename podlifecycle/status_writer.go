package podlifecycle

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/podstatus"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// computeStatus is the status the pod has now, from the runtime state just read. It builds on the status
// last computed (the kubelet's status manager cache); api is the status the API holds, whose conditions
// owned by others (readiness gates) it keeps.
func (r *Reconciler) computeStatus(ctx context.Context, w *podWorker, pod *corev1.Pod, api *corev1.PodStatus, st *runtime.PodStatus) corev1.PodStatus {
	in := podstatus.Input{
		API: api,
		Pod: pod, Runtime: st, Waiting: w.waitingSnapshot(), HostIPs: r.hostIPs, Override: w.override,
		Terminating: w.stage() >= terminating, Terminated: w.stage() == terminated,
		RuntimeName: r.runtimeName(ctx), Now: r.clock.Now(), Ready: r.probes.Ready, Started: r.probes.Started,
		TerminationMessage: func(c *runtime.ContainerStatus) string {
			return podconfig.ReadTerminationMessage(terminationLogPath(c), corev1.TerminationMessagePolicy(c.TerminationMessagePolicy), c.ExitCode, c.LogPath)
		},
	}
	if last := r.statuses.Status(pod.UID); last != nil {
		p := pod.DeepCopy()
		p.Status = *last
		in.Pod = p
	}
	return podstatus.Compute(in)
}

// terminationLogPath is where the agent keeps an attempt's termination message on the host: the mount
// source of the container's terminationMessagePath (recorded by the runtime in its mounts).
func terminationLogPath(c *runtime.ContainerStatus) string { return c.TerminationLogHostPath }

// writeStatus computes the pod's status from the runtime state st and sets it with the status manager,
// which writes it when the API does not hold it yet.
func (r *Reconciler) writeStatus(ctx context.Context, w *podWorker, pod *corev1.Pod, st *runtime.PodStatus) error {
	res, err := r.statuses.SetPodStatus(ctx, pod, func(api *corev1.PodStatus) corev1.PodStatus {
		return r.computeStatus(ctx, w, pod, api, st)
	})
	if res.Written {
		r.observeStart(w, pod, &res.Status)
		ctrl.LoggerFrom(ctx).V(2).Info("Pod status written", "phase", res.Status.Phase)
	}
	return err
}
