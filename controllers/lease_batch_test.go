package controllers

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestLeaseBatchRenewsEveryMember drives a batch of three nodes on a fake clock: each lease is created
// when its node joins and renewed once per interval; a node that leaves is no longer renewed.
func TestLeaseBatchRenewsEveryMember(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var objs []corev1.Node
	for _, n := range []string{"a", "b", "c"} {
		objs = append(objs, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, UID: types.UID("uid-" + n)}})
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(&objs[0], &objs[1], &objs[2]).Build()
	b := &LeaseBatch{Clock: clk, Interval: 10 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var leave func()
	for _, n := range []string{"a", "b", "c"} {
		leave = b.Join(ctx, &LeaseController{Client: c, Reader: c, Clock: clk, NodeName: n, LeaseDuration: 40 * time.Second})
	}
	renewTime := func(n string) time.Time {
		l := &coordinationv1.Lease{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: NodeLeaseNamespace, Name: n}, l); err != nil {
			t.Fatalf("lease %s: %v", n, err)
		}
		return l.Spec.RenewTime.Time
	}
	for _, n := range []string{"a", "b", "c"} {
		if !renewTime(n).Equal(clk.Now()) {
			t.Errorf("lease %s not created at join", n)
		}
	}
	leave() // c leaves
	joined := clk.Now()
	clk.Step(10 * time.Second)
	b.renewAll()
	for _, n := range []string{"a", "b"} {
		if got := renewTime(n); !got.Equal(clk.Now()) {
			t.Errorf("lease %s renewed at %v, want %v", n, got, clk.Now())
		}
	}
	if got := renewTime("c"); !got.Equal(joined) {
		t.Errorf("lease c renewed after its node left: %v", got)
	}
}
