package integration_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/runtime/fake"
)

var _ = Describe("Admission beside a pod that is gone from the API", func() {
	ctx := context.Background()

	// A pod force-deleted from the API still has its containers stopping on the node (within their grace
	// period); like the kubelet, whose pod manager drops it at once, the agent no longer counts it against
	// the node, so a pod the scheduler placed in its room is admitted.
	It("does not count an orphan being stopped against the node's resources", func() {
		nodeName := "orphan-" + utilrand.String(6)
		ns := "ns-" + utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		rt, cri := startFakeRuntime()
		rt.AddImage("docker.io/library/busybox:latest", 1<<20)
		rt.ScriptContainer("slow", fake.Behaviour{IgnoreSIGTERM: true}) // stops only when its grace period ends
		newPodBed(nodeName, rt, cri)

		cpu := func(q string) func(*corev1.Pod) {
			return func(p *corev1.Pod) {
				l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
				p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: l, Limits: l}
			}
		}
		Expect(admin.Create(ctx, busyboxPod(ns, "hog", nodeName, cpu("1500m"), func(p *corev1.Pod) {
			p.Spec.Containers[0].Name = "slow"
		}))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(apiPod(ctx, g, ns, "hog").Status.Phase).To(Equal(corev1.PodRunning))
		}).Should(Succeed())
		Expect(admin.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hog"}},
			client.GracePeriodSeconds(0))).To(Succeed())

		Expect(admin.Create(ctx, busyboxPod(ns, "app", nodeName, cpu("900m")))).To(Succeed())
		Eventually(func(g Gomega) {
			p := apiPod(ctx, g, ns, "app")
			g.Expect(p.Status.Reason).NotTo(Equal("OutOfcpu"), p.Status.Message)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}).Should(Succeed())
		var hogRunning bool
		for _, c := range podContainers(rt, "hog") {
			hogRunning = hogRunning || c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
		}
		Expect(hogRunning).To(BeTrue(), "the orphan was still stopping when the new pod was admitted")
	})
})
