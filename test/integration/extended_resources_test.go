package integration_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("Extended resources", func() {
	ctx := context.Background()

	// An operator advertises an extended resource on the node's status (as `kubectl patch node
	// --subresource=status` and the upstream e2e specs do); the agent's own status writes keep it, its
	// allocatable is its capacity, and pods bound to the node are admitted against it with the kubelet's
	// OutOf<resource> rejection.
	It("keeps an extended resource someone else advertised and admits pods against it", func() {
		nodeName := "ext-" + utilrand.String(6)
		ns := "ns-" + utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		rt, cri := startFakeRuntime()
		rt.AddImage("docker.io/library/busybox:latest", 1<<20)
		bed := newPodBed(nodeName, rt, cri)

		const dongle = corev1.ResourceName("example.com/dongle")
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
		Expect(admin.Status().Patch(ctx, node, client.RawPatch(types.MergePatchType,
			[]byte(`{"status":{"capacity":{"example.com/dongle":"2"}}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			bed.step(10 * time.Second) // nodeStatusUpdateFrequency: the agent writes the node's status again
			n := &corev1.Node{}
			g.Expect(admin.Get(ctx, types.NamespacedName{Name: nodeName}, n)).To(Succeed())
			g.Expect(n.Status.Capacity).To(HaveKeyWithValue(dongle, resource.MustParse("2")))
			g.Expect(n.Status.Allocatable).To(HaveKeyWithValue(dongle, resource.MustParse("2")))
		}).Should(Succeed())

		withDongle := func(p *corev1.Pod) {
			one := corev1.ResourceList{dongle: resource.MustParse("1")}
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
		}
		for _, name := range []string{"a", "b"} {
			Expect(admin.Create(ctx, busyboxPod(ns, name, nodeName, withDongle))).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(apiPod(ctx, g, ns, name).Status.Phase).To(Equal(corev1.PodRunning))
			}).Should(Succeed())
		}
		Expect(admin.Create(ctx, busyboxPod(ns, "c", nodeName, withDongle))).To(Succeed())
		Eventually(func(g Gomega) {
			p := apiPod(ctx, g, ns, "c")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("OutOfexample.com/dongle"))
			g.Expect(p.Status.Message).To(Equal("Pod was rejected: Node didn't have enough resource: example.com/dongle, requested: 1, used: 2, capacity: 2"))
		}).Should(Succeed())
		Expect(podContainers(rt, "c")).To(BeEmpty())
	})
})
