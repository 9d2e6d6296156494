package integration_test

import (
	"context"

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

// The upstream [NodeConformance] specs "Pod Extended (container restart policy)", "Pod Extended
// (RestartAllContainers)" and the Job's "containers restarted by container restart policy should not
// trigger PodFailurePolicy", on the in-memory runtime.
var _ = Describe("Container restart policy and restart rules", func() {
	var (
		ns       string
		nodeName string
		rt       *fake.Runtime
		ctx      = context.Background()
	)
	restartOn42 := []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	restartAllOn42 := []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}

	getPod := func(g Gomega, name string) *corev1.Pod { return apiPod(ctx, g, ns, name) }
	// running is the running attempt of a container of the pod.
	running := func(g Gomega, podName, ctrName string) *runtimeapi.Container {
		for _, c := range rt.Containers() {
			if c.Labels[runtime.LabelPodName] == podName && c.Metadata.Name == ctrName &&
				c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return c
			}
		}
		g.Expect("no running container " + ctrName).To(BeEmpty())
		return nil
	}
	attempts := func(podName, ctrName string) int {
		n := 0
		for _, c := range rt.Containers() {
			if c.Labels[runtime.LabelPodName] == podName && c.Metadata.Name == ctrName {
				n++
			}
		}
		return n
	}
	status := func(p *corev1.Pod, name string) corev1.ContainerStatus {
		for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for _, st := range list {
				if st.Name == name {
					return st
				}
			}
		}
		return corev1.ContainerStatus{}
	}
	exitRunning := func(podName, ctrName string, code int32) {
		var c *runtimeapi.Container
		Eventually(func(g Gomega) { c = running(g, podName, ctrName) }).Should(Succeed())
		Expect(rt.ExitContainer(c.Id, code, "")).To(Succeed())
	}

	BeforeEach(func() {
		nodeName = "restart-" + utilrand.String(6)
		ns = "ns-" + utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		var cri *runtime.Client
		rt, cri = startFakeRuntime()
		rt.AddImage("docker.io/library/busybox:latest", 1<<20)
		newPodBed(nodeName, rt, cri)
	})

	It("restarts a container of a Never pod on a rule match, and ends the pod on a mismatch", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "rule", nodeName, func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = restartOn42
		}))).To(Succeed())
		exitRunning("rule", "app", 42)
		Eventually(func(g Gomega) {
			g.Expect(running(g, "rule", "app").Metadata.Attempt).To(BeEquivalentTo(1))
			g.Expect(status(getPod(g, "rule"), "app").RestartCount).To(BeEquivalentTo(1))
		}).Should(Succeed())
		exitRunning("rule", "app", 1)
		Eventually(func(g Gomega) {
			p := getPod(g, "rule")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(status(p, "app").RestartCount).To(BeEquivalentTo(1))
		}).Should(Succeed())
		Expect(attempts("rule", "app")).To(Equal(2))
	})

	It("does not restart a container with restartPolicy Never in an Always pod: the pod fails", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "never", nodeName, func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyAlways
			p.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
		}))).To(Succeed())
		exitRunning("never", "app", 1)
		Eventually(func(g Gomega) {
			p := getPod(g, "never")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(status(p, "app").RestartCount).To(BeZero())
		}).Should(Succeed())
		Expect(attempts("never", "app")).To(Equal(1)) // and never later: TestNeverPodIsNotRestartedAfterItsExit
	})

	It("restarts a failure of an OnFailure container in a Never pod, which then succeeds", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "job", nodeName, func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyOnFailure)
		}))).To(Succeed())
		exitRunning("job", "app", 1)
		Eventually(func(g Gomega) {
			g.Expect(running(g, "job", "app").Metadata.Attempt).To(BeEquivalentTo(1))
		}).Should(Succeed())
		exitRunning("job", "app", 0)
		Eventually(func(g Gomega) {
			p := getPod(g, "job")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
			g.Expect(status(p, "app").RestartCount).To(BeEquivalentTo(1))
		}).Should(Succeed())
	})

	It("restarts all containers in place when a RestartAllContainers rule fires", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "all", nodeName, func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Spec.InitContainers = []corev1.Container{
				{Name: "init", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent},
				{Name: "sidecar", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent,
					RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
			}
			p.Spec.Containers = []corev1.Container{
				{Name: "source", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent,
					RestartPolicy: ptr.To(corev1.ContainerRestartPolicyNever), RestartPolicyRules: restartAllOn42},
				{Name: "regular", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent},
			}
		}))).To(Succeed())
		exitRunning("all", "init", 0)
		Eventually(func(g Gomega) {
			running(g, "all", "sidecar")
			running(g, "all", "regular")
		}).Should(Succeed())
		exitRunning("all", "source", 42)

		By("removing every container and starting over from the first init container")
		Eventually(func(g Gomega) {
			running(g, "all", "init")
			g.Expect(attempts("all", "source")).To(BeZero())
			g.Expect(attempts("all", "regular")).To(BeZero())
			g.Expect(attempts("all", "sidecar")).To(BeZero())
		}).Should(Succeed())
		exitRunning("all", "init", 0)
		Eventually(func(g Gomega) {
			running(g, "all", "sidecar")
			running(g, "all", "source")
			running(g, "all", "regular")
			p := getPod(g, "all")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			for _, name := range []string{"init", "sidecar", "source", "regular"} {
				st := status(p, name)
				g.Expect(st.RestartCount).To(BeNumerically(">", 0), name)
				g.Expect(st.LastTerminationState.Terminated).NotTo(BeNil(), name)
			}
			g.Expect(podCondition(p, corev1.AllContainersRestarting)).To(Equal(corev1.ConditionFalse))
		}).Should(Succeed())
	})
})
