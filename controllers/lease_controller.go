package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeLeaseNamespace holds the nodes' heartbeat Leases.
const NodeLeaseNamespace = corev1.NamespaceNodeLease

// maxLeaseUpdateRetries is how often an update is retried before falling back to a fresh GET.
const maxLeaseUpdateRetries = 5

// LeaseController keeps the node's Lease in kube-node-lease renewed, as the kubelet's node lease
// controller does: every quarter of the lease duration it updates the lease it last wrote (optimistic,
// no GET), and only when that fails reads the lease again, creating it if it is missing. The Node
// authorizer lets a node get, create and update its own Lease by name only, so the lease is never listed
// or watched. Reader must read Nodes (for the owner reference); Client must not cache Leases.
type LeaseController struct {
	Client        client.Client
	Reader        client.Reader
	Clock         clock.WithTicker
	NodeName      string
	LeaseDuration time.Duration
	// RenewInterval defaults to a quarter of LeaseDuration.
	RenewInterval time.Duration

	latest *coordinationv1.Lease
}

// SetupWithManager runs the controller with the manager (it is a Runnable, not a watch-driven
// controller: nothing about the Lease is watched).
func (c *LeaseController) SetupWithManager(mgr ctrl.Manager) error {
	return mgr.Add(c)
}

// Start renews the lease until ctx ends.
func (c *LeaseController) Start(ctx context.Context) error {
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithName("lease").WithValues("node", c.NodeName))
	interval := c.RenewInterval
	if interval <= 0 {
		interval = c.LeaseDuration / 4
	}
	for {
		c.sync(ctx, interval)
		select {
		case <-ctx.Done():
			return nil
		case <-c.Clock.After(interval):
		}
	}
}

// sync renews the lease once: from the last written lease if there is one, else from the API.
func (c *LeaseController) sync(ctx context.Context, backoffCap time.Duration) {
	log := ctrl.LoggerFrom(ctx)
	if c.latest != nil {
		err := c.retryUpdate(ctx, c.latest)
		if err == nil {
			return
		}
		log.Info("Failed to update lease using the last written lease, falling back to a fresh read", "err", err.Error())
	}
	lease, created := c.backoffEnsure(ctx, backoffCap)
	if lease == nil {
		return
	}
	c.latest = lease
	if !created {
		if err := c.retryUpdate(ctx, lease); err != nil {
			log.Error(err, "Failed to renew lease")
		}
	}
}

// backoffEnsure gets the lease, creating it when missing, retrying with a doubling wait up to cap.
// It returns nil only when ctx ended.
func (c *LeaseController) backoffEnsure(ctx context.Context, backoffCap time.Duration) (*coordinationv1.Lease, bool) {
	wait := 100 * time.Millisecond
	for {
		lease, created, err := c.ensure(ctx)
		if err == nil {
			return lease, created
		}
		ctrl.LoggerFrom(ctx).Error(err, "Failed to ensure lease exists, will retry", "retryIn", wait)
		select {
		case <-ctx.Done():
			return nil, false
		case <-c.Clock.After(wait):
		}
		wait = min(2*wait, backoffCap)
	}
}

func (c *LeaseController) ensure(ctx context.Context) (*coordinationv1.Lease, bool, error) {
	lease := &coordinationv1.Lease{}
	err := c.Client.Get(ctx, types.NamespacedName{Namespace: NodeLeaseNamespace, Name: c.NodeName}, lease)
	if err == nil {
		return lease, false, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, false, fmt.Errorf("get lease: %w", err)
	}
	lease = c.renewed(ctx, nil)
	if err := c.Client.Create(ctx, lease); err != nil {
		return nil, false, fmt.Errorf("create lease: %w", err)
	}
	return lease, true, nil
}

// retryUpdate writes a renewed copy of base. A conflict is returned at once: base is stale.
func (c *LeaseController) retryUpdate(ctx context.Context, base *coordinationv1.Lease) error {
	var err error
	for range maxLeaseUpdateRetries {
		lease := c.renewed(ctx, base)
		if err = c.Client.Update(ctx, lease); err == nil {
			c.latest = lease
			return nil
		}
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || errors.Is(ctx.Err(), context.Canceled) {
			return err
		}
	}
	return err
}

// renewed returns a copy of base (or a new lease) held by this node, renewed now, owned by the Node.
func (c *LeaseController) renewed(ctx context.Context, base *coordinationv1.Lease) *coordinationv1.Lease {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: c.NodeName, Namespace: NodeLeaseNamespace}}
	if base != nil {
		lease = base.DeepCopy()
	}
	lease.Spec.HolderIdentity = ptr.To(c.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(c.LeaseDuration / time.Second))
	lease.Spec.RenewTime = &metav1.MicroTime{Time: c.Clock.Now()}
	c.setNodeOwner(ctx, lease)
	return lease
}

// setNodeOwner makes the Node own its lease, so deleting the Node deletes the lease. A node that is not
// registered yet is no error: the reference is added on a later renewal. Unlike the kubelet, which sets the
// reference only on a lease without owners, a reference to an earlier Node of the same name (the node was
// deleted and registered again) is replaced too: left alone, the garbage collector would delete the
// lease of the live node, and the node would go without a heartbeat until the next renewal recreates it.
func (c *LeaseController) setNodeOwner(ctx context.Context, lease *coordinationv1.Lease) {
	if owned := lease.OwnerReferences; len(owned) > 0 && !c.ownedByNodeName(owned) {
		return // owners someone else chose: keep them
	}
	node := &corev1.Node{}
	if err := c.Reader.Get(ctx, types.NamespacedName{Name: c.NodeName}, node); err != nil {
		if !apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to get node for the lease owner reference")
		}
		return
	}
	if len(lease.OwnerReferences) == 1 && lease.OwnerReferences[0].UID == node.UID {
		return
	}
	lease.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: corev1.SchemeGroupVersion.String(), Kind: "Node", Name: node.Name, UID: node.UID,
	}}
}

// ownedByNodeName reports whether the only owner is a Node of this node's name (this one, or an earlier
// one of the same name).
func (c *LeaseController) ownedByNodeName(owners []metav1.OwnerReference) bool {
	return len(owners) == 1 && owners[0].Kind == "Node" && owners[0].Name == c.NodeName
}
