package podlifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podstatus"
	"github.com/nodelet/nodelet/runtime"
)

func (r *Reconciler) setWaiting(w *podWorker, name string, wt podstatus.Waiting) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.waiting[name] = wt
}

func (r *Reconciler) clearWaiting(w *podWorker, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(w.waiting, name)
}

func (r *Reconciler) waitingSnapshot(w *podWorker) map[string]podstatus.Waiting {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]podstatus.Waiting, len(w.waiting))
	for k, v := range w.waiting {
		out[k] = v
	}
	return out
}

// computeStatus is the status the pod has now, from the runtime state just read. It builds on the status
// last computed (the kubelet's status manager cache); api is the status the API holds, whose conditions
// owned by others (readiness gates) it keeps.
func (r *Reconciler) computeStatus(ctx context.Context, w *podWorker, pod *corev1.Pod, api *corev1.PodStatus, st *runtime.PodStatus) corev1.PodStatus {
	in := podstatus.Input{
		API: api,
		Pod: pod, Runtime: st, Waiting: r.waitingSnapshot(w), HostIPs: r.hostIPs, Override: w.override,
		Terminating: w.stage() >= terminating, Terminated: w.stage() == terminated,
		RuntimeName: r.runtimeName(ctx), Now: r.clock.Now(), Ready: r.probes.Ready, Started: r.probes.Started,
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

// writeStatus computes the pod's status and writes it when it differs from what the API holds: the
// object's own status, or what the agent last wrote while the object is still the version that write was
// computed against or the one it made (statusWrite.base). So a status someone else wrote — a forged
// container ID, a phase — is written back at the next sync. Only what the agent owns is compared and
// patched: conditions others own (readiness gates) are never in the patch, so a user's or a controller's
// condition is never overwritten with a stale copy. The patch carries the object's UID as a
// precondition, so a status never lands on a newer pod of the same name; it is a status-only write,
// which the pod watch ignores. A static pod's status goes to its mirror pod, when there is one.
func (r *Reconciler) writeStatus(ctx context.Context, w *podWorker, pod *corev1.Pod, st *runtime.PodStatus) (result, error) {
	target := r.statusTarget(ctx, pod)
	api := &pod.Status
	if target != nil {
		api = &target.Status
	}
	status := r.computeStatus(ctx, w, pod, api, st)
	w.lastStatus = &status
	if target == nil {
		return result{}, nil
	}
	base := w.written.Load().base(target)
	owned := podstatus.Owned(&status)
	if podstatus.Equal(base, owned) {
		return result{}, nil
	}
	patch, err := statusPatch(target.UID, base, owned)
	if err != nil {
		return result{}, err
	}
	obj := &corev1.Pod{}
	obj.Namespace, obj.Name = target.Namespace, target.Name
	if err := r.client.Status().Patch(ctx, obj, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return result{}, nil // the object is gone; its runtime state is cleaned up as an orphan
		}
		return result{}, fmt.Errorf("update status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	w.written.Store(w.written.Load().next(target.UID, target.ResourceVersion, obj.ResourceVersion, owned))
	r.observeStart(w, pod, &status)
	ctrl.LoggerFrom(ctx).V(2).Info("Pod status written", "phase", status.Phase)
	return result{}, nil
}

// statusWrite is the agent's last status write to an API object: what it sent of what it owns, and the
// object's resourceVersion before and after the write.
type statusWrite struct {
	uid  types.UID
	sent *corev1.PodStatus
	// versions are the object's resource versions the agent's recent writes were computed against or
	// made (the last maxKnownVersions), the newest last: none is newer than the last write.
	versions []string
}

// maxKnownVersions bounds statusWrite.versions: more writes than this in flight before the cache sees one
// of them do not happen.
const maxKnownVersions = 16

// next is the record of a write of sent computed against the object at version before that made version
// after, following s (of the same object, or nil).
func (s *statusWrite) next(uid types.UID, before, after string, sent *corev1.PodStatus) *statusWrite {
	var versions []string
	if s != nil && s.uid == uid {
		versions = s.versions
	}
	versions = append(slices.Clone(versions), before, after)
	if len(versions) > maxKnownVersions {
		versions = versions[len(versions)-maxKnownVersions:]
	}
	return &statusWrite{uid: uid, sent: sent, versions: versions}
}

// base is what the API holds of what the agent owns in obj (a cached copy of the object last written):
// what the agent last sent, while obj is a version one of its recent writes was computed against or made
// (the cache has not seen the last write yet: two writes in flight leave it showing the first one's
// version for a while); else obj's own status, whoever wrote it.
func (s *statusWrite) base(obj *corev1.Pod) *corev1.PodStatus {
	if s != nil && s.uid == obj.UID && slices.Contains(s.versions, obj.ResourceVersion) {
		return s.sent
	}
	return podstatus.Owned(&obj.Status)
}

// overwritten reports whether obj's status is no longer what the agent last wrote to it: someone else
// wrote it since. False when the agent never wrote to obj.
func (s *statusWrite) overwritten(obj *corev1.Pod) bool {
	return s != nil && s.uid == obj.UID && !podstatus.Equal(s.base(obj), s.sent)
}

// statusTarget is the API object that carries the pod's status: the pod itself, or for a static pod its
// mirror pod (nil when there is none yet, or no API server).
func (r *Reconciler) statusTarget(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	if r.client == nil {
		return nil
	}
	if !podrules.IsStaticPod(pod) {
		return pod
	}
	mirror := &corev1.Pod{}
	gctx, cancel := context.WithTimeout(ctx, apiReadTimeout)
	defer cancel()
	if err := r.client.Get(gctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, mirror); err != nil {
		return nil
	}
	if !podrules.IsMirrorOf(mirror, pod) || mirror.DeletionTimestamp != nil {
		return nil
	}
	return mirror
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
