package controllers

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/podstatus"
	"github.com/nodelet/nodelet/runtime"
)

func (r *PodReconciler) setWaiting(w *podWorker, name string, wt podstatus.Waiting) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.waiting[name] = wt
}

func (r *PodReconciler) clearWaiting(w *podWorker, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(w.waiting, name)
}

func (r *PodReconciler) waitingSnapshot(w *podWorker) map[string]podstatus.Waiting {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]podstatus.Waiting, len(w.waiting))
	for k, v := range w.waiting {
		out[k] = v
	}
	return out
}

// computeStatus is the status the pod has now, from the runtime state just read.
func (r *PodReconciler) computeStatus(ctx context.Context, w *podWorker, pod *corev1.Pod, st *runtime.PodStatus) corev1.PodStatus {
	in := podstatus.Input{
		Pod: pod, Runtime: st, Waiting: r.waitingSnapshot(w), HostIPs: r.HostIPs, Override: w.override,
		Terminating: w.state >= terminating, Terminated: w.state == terminated,
		RuntimeName: r.runtimeName(ctx), Now: r.Clock.Now(),
		TerminationMessage: func(c *runtime.ContainerStatus) string {
			return runtime.ReadTerminationMessage(terminationLogPath(c), corev1.TerminationMessagePolicy(c.TerminationMessagePolicy), c.ExitCode, c.LogPath)
		},
	}
	if w.lastStatus != nil {
		p := pod.DeepCopy()
		p.Status = *w.lastStatus
		in.Pod = p
	}
	return podstatus.Compute(in)
}

// terminationLogPath is where the agent keeps an attempt's termination message on the host: the mount
// source of the container's terminationMessagePath (recorded by the runtime in its mounts).
func terminationLogPath(c *runtime.ContainerStatus) string { return c.TerminationLogHostPath }

// writeStatus computes the pod's status and writes it when it differs from what the API holds (or what
// this agent last wrote). The patch carries the pod's UID as a precondition, so a status never lands on a
// newer pod of the same name; it is a status-only write, which the pod watch ignores.
func (r *PodReconciler) writeStatus(ctx context.Context, w *podWorker, pod *corev1.Pod, st *runtime.PodStatus) (result, error) {
	status := r.computeStatus(ctx, w, pod, st)
	current := pod.Status
	if w.lastStatus != nil {
		current = *w.lastStatus
	}
	if podstatus.Equal(&current, &status) && podstatus.Equal(&pod.Status, &status) {
		return result{}, nil
	}
	patch, err := statusPatch(pod.UID, &current, &status)
	if err != nil {
		return result{}, err
	}
	target := &corev1.Pod{}
	target.Namespace, target.Name = pod.Namespace, pod.Name
	if err := r.Client.Status().Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return result{}, nil // the pod is gone; its runtime state is cleaned up as an orphan
		}
		return result{}, fmt.Errorf("update status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	w.lastStatus = &status
	r.observeStart(w, pod, &status)
	ctrl.LoggerFrom(ctx).V(2).Info("Pod status written", "phase", status.Phase)
	return result{}, nil
}

// statusPatch is the kubelet's status patch: a two-way strategic merge patch from the status the API is
// believed to hold to the new one, plus the pod's UID as a precondition.
func statusPatch(uid types.UID, from, to *corev1.PodStatus) ([]byte, error) {
	oldJSON, err := json.Marshal(corev1.Pod{Status: *from})
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: *to})
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Pod{})
}
