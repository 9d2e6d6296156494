package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nodelet/nodelet/podrules"
)

// staticPods is what the mirror pod reconciler asks of the static pod store (staticpods.Store).
type staticPods interface {
	Get(key types.NamespacedName) (*corev1.Pod, bool)
	Source() source.Source
	SeenSources(kinds ...string) bool
}

// MirrorPodReconciler keeps, for each static pod, a mirror pod in the API server — as the kubelet's
// mirror client does: same name, namespace and spec, the annotation kubernetes.io/config.mirror set to
// the static pod's hash, owned by the Node. A deleted or stale mirror pod is created again; a mirror pod
// whose static pod is gone is deleted, but only once every configured static pod source has delivered
// its pods once (the kubelet's "sources ready"): until then a static pod missing from the store may just
// not have been read yet — an unreachable staticPodURL at start-up must not delete the control plane's
// mirror pods. Mirror pods only reflect static pods: deleting one never touches the static pod's
// containers.
type MirrorPodReconciler struct {
	Client client.Client
	Static staticPods
	// StaticKinds are the configured static pod sources ("file", "http"); at least one.
	StaticKinds []string
	NodeName    string
	// NodeUID returns the Node's UID for the owner reference ("" while the node is not registered).
	NodeUID func(ctx context.Context) types.UID
}

// sourcesWait is how often a mirror pod without a static pod is looked at again while a static pod
// source has not delivered yet.
const sourcesWait = time.Second

// SetupWithManager watches mirror pods (creations and deletions) and the static pod store.
func (r *MirrorPodReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if len(r.StaticKinds) == 0 {
		return errors.New("mirror pod controller: no static pod source configured")
	}
	mirrors := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pod, ok := o.(*corev1.Pod)
		return ok && podrules.IsMirrorPod(pod)
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("mirrorpod").
		For(&corev1.Pod{}, builder.WithPredicates(mirrors, predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return !e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp())
			},
		})).
		WatchesRawSource(r.Static.Source()).
		Complete(r)
}

// Reconcile makes the mirror pod of key match its static pod.
func (r *MirrorPodReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	static, hasStatic := r.Static.Get(req.NamespacedName)
	mirror := &corev1.Pod{}
	err := r.Client.Get(ctx, req.NamespacedName, mirror)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	exists := err == nil
	if exists && !podrules.IsMirrorPod(mirror) {
		// An ordinary API pod holds the name; the kubelet leaves it alone too.
		return ctrl.Result{}, nil
	}
	if !hasStatic {
		return r.reconcileOrphan(ctx, mirror, exists)
	}
	switch {
	case exists && mirror.DeletionTimestamp != nil:
		// Someone deleted it: finish the deletion at once (nothing runs behind a mirror pod); the delete
		// event brings us back to create it again.
		return ctrl.Result{}, r.deleteMirror(ctx, mirror, "it was deleted")
	case exists && !podrules.IsMirrorOf(mirror, static):
		return ctrl.Result{}, r.deleteMirror(ctx, mirror, "it is stale")
	case exists:
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.createMirror(ctx, static)
}

// reconcileOrphan handles a key with no static pod: its mirror pod goes, but only once every static pod source
// has been read (the kubelet's "sources ready"), so a source that is not answering yet deletes nothing.
func (r *MirrorPodReconciler) reconcileOrphan(ctx context.Context, mirror *corev1.Pod, exists bool) (ctrl.Result, error) {
	switch {
	case !exists:
		return ctrl.Result{}, nil
	case !r.Static.SeenSources(r.StaticKinds...):
		ctrl.LoggerFrom(ctx).V(1).Info("Keeping mirror pod until every static pod source was read once")
		return ctrl.Result{RequeueAfter: sourcesWait}, nil
	}
	return ctrl.Result{}, r.deleteMirror(ctx, mirror, "its static pod is gone")
}

// createMirror creates the mirror pod of a static pod.
func (r *MirrorPodReconciler) createMirror(ctx context.Context, static *corev1.Pod) error {
	mirror := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: static.Name, Namespace: static.Namespace,
			Labels: static.Labels, Annotations: map[string]string{},
		},
		Spec: *static.Spec.DeepCopy(),
	}
	for k, v := range static.Annotations {
		mirror.Annotations[k] = v
	}
	mirror.Annotations[podrules.ConfigMirrorAnnotation] = static.Annotations[podrules.ConfigHashAnnotation]
	if uid := r.NodeUID(ctx); uid != "" {
		mirror.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: r.NodeName, UID: uid, Controller: ptr.To(true),
		}}
	}
	if err := r.Client.Create(ctx, mirror); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create mirror pod %s/%s: %w", static.Namespace, static.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Created mirror pod", "pod", client.ObjectKeyFromObject(mirror))
	return nil
}

// deleteMirror deletes a mirror pod, with its UID as a precondition.
func (r *MirrorPodReconciler) deleteMirror(ctx context.Context, mirror *corev1.Pod, why string) error {
	err := r.Client.Delete(ctx, mirror, client.GracePeriodSeconds(0), client.Preconditions{UID: ptr.To(mirror.UID)})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete mirror pod %s/%s: %w", mirror.Namespace, mirror.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted mirror pod", "pod", client.ObjectKeyFromObject(mirror), "reason", why)
	return nil
}
