package simnode

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// A node started with a fake clock stamps its Lease and Node heartbeats with that clock's time: every
// component of the agent takes the injected clock.
func TestNodeRunsOnTheInjectedClock(t *testing.T) {
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal("envtest (KUBEBUILDER_ASSETS):", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	at := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	clk := clocktesting.NewFakeClock(at)
	ctx := context.Background()
	n, err := Start(ctx, cfg, Options{Spec: Spec{Name: "clocked"}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var lease coordinationv1.Lease
	gomega.NewWithT(t).Eventually(func() *metav1.MicroTime {
		_ = c.Get(ctx, types.NamespacedName{Namespace: "kube-node-lease", Name: "clocked"}, &lease)
		return lease.Spec.RenewTime
	}).WithTimeout(30 * time.Second).ShouldNot(gomega.BeNil())
	if got := lease.Spec.RenewTime.UTC(); !got.Equal(at) {
		t.Errorf("Lease renewed at %s, want the fake clock's %s", got, at)
	}
}
