package integration_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
)

// A pod's source is the agent's to say: an API pod whose creator annotated it as a file pod is still an API pod.
var _ = Describe("Pod reconciler: an API pod that claims to be static", func() {
	var (
		ns, nodeName string
		rt           *fake.Runtime
		bed          *podBed
		ctx          = context.Background()
	)

	BeforeEach(func() {
		nodeName = "source-" + utilrand.String(6)
		ns = "ns-" + utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		var cri *runtime.Client
		rt, cri = startFakeRuntime()
		rt.AddImage("docker.io/library/busybox:latest", 1<<20)
		bed = newPodBed(nodeName, rt, cri)
		DeferCleanup(func() { bed.stop() })
	})

	for _, source := range []string{podrules.ConfigSourceFile, podrules.ConfigSourceHTTP} {
		It("writes the status of a pod annotated "+podrules.ConfigSourceAnnotation+": "+source, func() {
			Expect(admin.Create(ctx, busyboxPod(ns, "claims", nodeName, func(p *corev1.Pod) {
				p.Annotations = map[string]string{podrules.ConfigSourceAnnotation: source}
			}))).To(Succeed())
			Eventually(func(g Gomega) {
				p := apiPod(ctx, g, ns, "claims")
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
				g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
				g.Expect(p.Status.ContainerStatuses[0].Ready).To(BeTrue())
			}).Should(Succeed(), "the agent writes the status of an API pod whatever source it claims")
			Expect(apiPod(ctx, Default, ns, "claims").Annotations).To(HaveKeyWithValue(podrules.ConfigSourceAnnotation, source),
				"the stamp is the agent's view; the API object is left as its creator wrote it")
		})
	}
})
