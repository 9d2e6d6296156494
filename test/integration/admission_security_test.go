package integration_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
)

var _ = Describe("Pod security and admission", func() {
	const wait = 10 * time.Second
	var (
		ns       string
		nodeName string
		rt       *fake.Runtime
		bed      *podBed
		ctx      = context.Background()
	)

	getPod := func(g Gomega, name string) *corev1.Pod { return apiPod(ctx, g, ns, name) }
	containersOf := func(podName string) []*runtimeapi.Container { return podContainers(rt, podName) }
	// nonRootPod is the upstream spec's pod: runAsNonRoot on the container, runAsUser as given.
	nonRootPod := func(name, image string, uid *int64) *corev1.Pod {
		return busyboxPod(ns, name, nodeName, func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Spec.Containers[0].Image = image
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: uid}
		})
	}
	// expectRefused waits for the container to wait in CreateContainerConfigError with the kubelet's
	// message (built from the pod by want) and its Failed event, with nothing created in the runtime.
	expectRefused := func(name string, want func(p *corev1.Pod) string) {
		var msg string
		Eventually(func(g Gomega) {
			p := getPod(g, name)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			w := p.Status.ContainerStatuses[0].State.Waiting
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.Reason).To(Equal("CreateContainerConfigError"))
			msg = want(p)
			g.Expect(w.Message).To(Equal(msg))
		}, wait).Should(Succeed())
		Eventually(bed.events.Events, wait).Should(Receive(Equal("Warning Failed Error: " + msg)))
		Expect(containersOf(name)).To(BeEmpty())
	}
	podDesc := func(p *corev1.Pod) string { return fmt.Sprintf("%s_%s(%s)", p.Name, p.Namespace, p.UID) }

	BeforeEach(func() {
		nodeName = "sec-" + utilrand.String(6)
		ns = "ns-" + utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		var cri *runtime.Client
		rt, cri = startFakeRuntime()
		rt.AddImage("docker.io/library/busybox:latest", 1<<20) // no user: root
		rt.AddImage("registry.example.com/nonroot:1.4", 1<<20)
		rt.SetImageUser("registry.example.com/nonroot:1.4", "1234")
		rt.AddImage("registry.example.com/named:1", 1<<20)
		rt.SetImageUser("registry.example.com/named:1", "app")
		bed = newPodBed(nodeName, rt, cri)
	})

	It("does not run a root image without a user ID under runAsNonRoot", func() {
		Expect(admin.Create(ctx, nonRootPod("implicit-root-uid", "busybox", nil))).To(Succeed())
		expectRefused("implicit-root-uid", func(p *corev1.Pod) string {
			return fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: app)", podDesc(p))
		})
	})

	It("does not run an explicit root user ID under runAsNonRoot", func() {
		Expect(admin.Create(ctx, nonRootPod("explicit-root-uid", "registry.example.com/nonroot:1.4", ptr.To[int64](0)))).To(Succeed())
		expectRefused("explicit-root-uid", func(p *corev1.Pod) string {
			return fmt.Sprintf("container's runAsUser breaks non-root policy (pod: %q, container: app)", podDesc(p))
		})
	})

	It("does not run an image whose user is a name under runAsNonRoot", func() {
		Expect(admin.Create(ctx, nonRootPod("named-uid", "registry.example.com/named:1", nil))).To(Succeed())
		expectRefused("named-uid", func(p *corev1.Pod) string {
			return fmt.Sprintf("container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root (pod: %q, container: app)", podDesc(p))
		})
	})

	It("runs an image's numeric non-root user under runAsNonRoot, as that user", func() {
		Expect(admin.Create(ctx, nonRootPod("implicit-nonroot-uid", "registry.example.com/nonroot:1.4", nil))).To(Succeed())
		var id string
		Eventually(func(g Gomega) {
			cs := containersOf("implicit-nonroot-uid")
			g.Expect(cs).To(HaveLen(1))
			g.Expect(cs[0].State).To(Equal(runtimeapi.ContainerState_CONTAINER_RUNNING))
			id = cs[0].Id
		}, wait).Should(Succeed())
		Expect(rt.ContainerConfig(id).GetLinux().GetSecurityContext().GetRunAsUser().GetValue()).To(BeEquivalentTo(1234))
	})

	It("runs a root image with an explicit non-root runAsUser", func() {
		Expect(admin.Create(ctx, nonRootPod("explicit-nonroot-uid", "busybox", ptr.To[int64](1000)))).To(Succeed())
		Eventually(func(g Gomega) {
			cs := containersOf("explicit-nonroot-uid")
			g.Expect(cs).To(HaveLen(1))
			g.Expect(rt.ContainerConfig(cs[0].Id).GetLinux().GetSecurityContext().GetRunAsUser().GetValue()).To(BeEquivalentTo(1000))
		}, wait).Should(Succeed())
	})

	DescribeTable("rejects a pod at admission with the kubelet's reason and message",
		func(name, reason, message string, mutate func(*corev1.Pod)) {
			Expect(admin.Create(ctx, busyboxPod(ns, name, nodeName, mutate))).To(Succeed())
			Eventually(func(g Gomega) {
				p := getPod(g, name)
				g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
				g.Expect(p.Status.Reason).To(Equal(reason))
				g.Expect(p.Status.Message).To(Equal("Pod was rejected: " + message))
			}, wait).Should(Succeed())
			Eventually(bed.events.Events, wait).Should(Receive(Equal("Warning " + reason + " " + message)))
			Expect(containersOf(name)).To(BeEmpty())
			for _, sb := range rt.Sandboxes() {
				Expect(sb.Labels[runtime.LabelPodName]).NotTo(Equal(name))
			}
		},
		Entry("spec.os another OS", "wrong-pod-os", "PodOSNotSupported",
			"Failed to admit pod as the OS field doesn't match node OS",
			func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Windows} }),
		Entry("kubernetes.io/os label another OS", "wrong-os-label", "PodOSSelectorNodeLabelDoesNotMatch",
			"Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
			func(p *corev1.Pod) { p.Labels = map[string]string{"kubernetes.io/os": "windows"} }),
		Entry("an unsafe sysctl not allowed on the node", "unsafe-sysctl", "SysctlForbidden",
			`forbidden sysctl: "kernel.msgmax" not allowlisted`,
			func(p *corev1.Pod) {
				p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax", Value: "10000000000"}}}
			}),
	)

	It("admits a safe sysctl written with slashes", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "slashes", nodeName, func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel/shm_rmid_forced", Value: "1"}}}
		}))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, "slashes").Status.Phase).To(Equal(corev1.PodRunning))
		}, wait).Should(Succeed())
	})
})
