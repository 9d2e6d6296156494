package controllers_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controllers"
)

var _ = Describe("Lease controller", func() {
	var (
		nodeName string
		clk      *clocktesting.FakeClock
		start    = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	)

	getLease := func(g Gomega) *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		g.Expect(admin.Get(context.Background(), types.NamespacedName{Namespace: "kube-node-lease", Name: nodeName}, l)).To(Succeed())
		return l
	}

	BeforeEach(func() {
		nodeName = "lease-" + utilrand.String(6)
		clk = clocktesting.NewFakeClock(start)
		mgr := newNodeManager(nodeName)
		lc := &controllers.LeaseController{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Clock: clk,
			NodeName: nodeName, LeaseDuration: 40 * time.Second,
		}
		Expect(lc.SetupWithManager(mgr)).To(Succeed())
		// The node exists, as it would once the Node reconciler registered it.
		Expect(admin.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})).To(Succeed())
		startManager(mgr)
	})

	It("creates the lease held by the node, owned by the Node, with the configured duration", func() {
		node := &corev1.Node{}
		Expect(admin.Get(context.Background(), types.NamespacedName{Name: nodeName}, node)).To(Succeed())
		Eventually(func(g Gomega) {
			l := getLease(g)
			g.Expect(l.Spec.HolderIdentity).To(Equal(ptr.To(nodeName)))
			g.Expect(l.Spec.LeaseDurationSeconds).To(Equal(ptr.To(int32(40))))
			g.Expect(l.Spec.RenewTime.Time.Equal(start)).To(BeTrue())
			g.Expect(l.OwnerReferences).To(ConsistOf(metav1.OwnerReference{
				APIVersion: "v1", Kind: "Node", Name: nodeName, UID: node.UID}))
		}).Should(Succeed())
	})

	It("renews every quarter of the lease duration, on the injected clock", func() {
		Eventually(func(g Gomega) { getLease(g) }).Should(Succeed())
		for i := 1; i <= 3; i++ {
			Eventually(clk.HasWaiters).Should(BeTrue())
			clk.Step(10 * time.Second)
			want := start.Add(time.Duration(i) * 10 * time.Second)
			Eventually(func(g Gomega) {
				g.Expect(getLease(g).Spec.RenewTime.Time.Equal(want)).To(BeTrue())
			}).Should(Succeed())
		}
		// Nothing happens between renewals.
		Consistently(func(g Gomega) {
			g.Expect(getLease(g).Spec.RenewTime.Time.Equal(start.Add(30 * time.Second))).To(BeTrue())
		}, "300ms").Should(Succeed())
	})

	It("falls back to a fresh read when someone else changed the lease", func() {
		var l *coordinationv1.Lease
		Eventually(func(g Gomega) { l = getLease(g) }).Should(Succeed())
		// Another writer bumps the resourceVersion: the controller's optimistic update then conflicts.
		l.Labels = map[string]string{"touched": "yes"}
		Expect(admin.Update(context.Background(), l)).To(Succeed())
		Eventually(clk.HasWaiters).Should(BeTrue())
		clk.Step(10 * time.Second)
		Eventually(func(g Gomega) {
			got := getLease(g)
			g.Expect(got.Spec.RenewTime.Time.Equal(start.Add(10 * time.Second))).To(BeTrue())
			g.Expect(got.Labels).To(HaveKeyWithValue("touched", "yes"))
		}).Should(Succeed())
	})

	It("recreates the lease when it was deleted", func() {
		var l *coordinationv1.Lease
		Eventually(func(g Gomega) { l = getLease(g) }).Should(Succeed())
		Expect(admin.Delete(context.Background(), l)).To(Succeed())
		Eventually(clk.HasWaiters).Should(BeTrue())
		clk.Step(10 * time.Second)
		Eventually(func(g Gomega) {
			got := getLease(g)
			g.Expect(got.UID).NotTo(Equal(l.UID))
			g.Expect(got.Spec.RenewTime.Time.Equal(start.Add(10 * time.Second))).To(BeTrue())
		}).Should(Succeed())
	})

	It("takes the lease over for a Node registered again under the same name", func() {
		var old *corev1.Node
		Eventually(func(g Gomega) {
			old = &corev1.Node{}
			g.Expect(admin.Get(context.Background(), types.NamespacedName{Name: nodeName}, old)).To(Succeed())
			g.Expect(getLease(g).OwnerReferences).To(ContainElement(HaveField("UID", old.UID)))
		}).Should(Succeed())
		Expect(admin.Delete(context.Background(), old)).To(Succeed())
		again := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
		Expect(admin.Create(context.Background(), again)).To(Succeed())
		Eventually(clk.HasWaiters).Should(BeTrue())
		clk.Step(10 * time.Second)
		Eventually(func(g Gomega) {
			g.Expect(getLease(g).OwnerReferences).To(ConsistOf(metav1.OwnerReference{
				APIVersion: "v1", Kind: "Node", Name: nodeName, UID: again.UID}))
		}).Should(Succeed())
	})
})
