package integration_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
)

var _ = Describe("Pod reconciler: readiness gates, ephemeral containers, sidecar termination", func() {
	var (
		ns       string
		nodeName string
		rt       *fake.Runtime
		cri      *runtime.Client
		ctx      = context.Background()
	)

	getPod := func(g Gomega, name string) *corev1.Pod { return apiPod(ctx, g, ns, name) }
	attempts := func(podName, ctrName string) []*runtimeapi.Container {
		var out []*runtimeapi.Container
		for _, c := range rt.Containers() {
			if c.Labels[runtime.LabelPodName] == podName && c.Metadata.Name == ctrName {
				out = append(out, c)
			}
		}
		return out
	}
	running := func(g Gomega, podName, ctrName string) *runtimeapi.Container {
		for _, c := range attempts(podName, ctrName) {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return c
			}
		}
		g.Expect("no running container " + ctrName).To(BeEmpty())
		return nil
	}

	BeforeEach(func() {
		nodeName = "gates-" + utilrand.String(6)
		ns = "ns-" + utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		rt, cri = startFakeRuntime()
		rt.AddImage("docker.io/library/busybox:latest", 1<<20)
		newPodBed(nodeName, rt, cri)
	})

	// The upstream spec "Pods should support pod readiness gates": the gates are set through pods/status
	// after the pod started; the agent's resync period (a minute here) is far longer than the waits.
	It("turns Ready True once every readiness gate is True, and False when one turns False", func() {
		const gate1, gate2 = "k8s.io/test-condition1", "k8s.io/test-condition2"
		Expect(admin.Create(ctx, busyboxPod(ns, "gated", nodeName, func(p *corev1.Pod) {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate1}, {ConditionType: gate2}}
		}))).To(Succeed())
		Eventually(func(g Gomega) {
			p := getPod(g, "gated")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(podCondition(p, corev1.ContainersReady)).To(Equal(corev1.ConditionTrue))
			g.Expect(podCondition(p, corev1.PodReady)).To(Equal(corev1.ConditionFalse))
		}).Should(Succeed())

		setGate := func(gate string, status corev1.ConditionStatus) {
			patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":%q}]}}`, gate, status)
			Expect(admin.Status().Patch(ctx, busyboxPod(ns, "gated", nodeName),
				client.RawPatch(types.StrategicMergePatchType, []byte(patch)))).To(Succeed())
		}
		setGate(gate1, corev1.ConditionTrue)
		Eventually(func(g Gomega) {
			p := getPod(g, "gated")
			ready := readyCondition(p)
			g.Expect(ready.Message).To(Equal(`corresponding condition of pod readiness gate "k8s.io/test-condition2" does not exist.`))
			g.Expect(podCondition(p, corev1.PodReady)).To(Equal(corev1.ConditionFalse))
			g.Expect(podCondition(p, gate1)).To(Equal(corev1.ConditionTrue), "the agent keeps the user's condition")
		}, 5*time.Second).Should(Succeed(), "the agent saw the first gate")

		setGate(gate2, corev1.ConditionTrue)
		Eventually(func(g Gomega) {
			g.Expect(podCondition(getPod(g, "gated"), corev1.PodReady)).To(Equal(corev1.ConditionTrue))
		}, 5*time.Second).Should(Succeed())

		setGate(gate1, corev1.ConditionFalse)
		Eventually(func(g Gomega) {
			p := getPod(g, "gated")
			g.Expect(podCondition(p, corev1.PodReady)).To(Equal(corev1.ConditionFalse))
			g.Expect(readyCondition(p).Reason).To(Equal("ReadinessGatesNotReady"))
			// Read after the agent's write: it kept the users' conditions (TestReadinessGatesOnTheClock
			// checks that no later sync changes them either).
			g.Expect(podCondition(p, gate1)).To(Equal(corev1.ConditionFalse))
			g.Expect(podCondition(p, gate2)).To(Equal(corev1.ConditionTrue))
		}, 5*time.Second).Should(Succeed())
	})

	// The upstream specs "Ephemeral Containers will start an ephemeral container in an existing pod" and
	// "should update the ephemeral containers in an existing pod" (kubectl debug).
	It("starts ephemeral containers added through pods/ephemeralcontainers, never restarts them, and stops them with the pod", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "debugged", nodeName))).To(Succeed())
		var app *runtimeapi.Container
		Eventually(func(g Gomega) { app = running(g, "debugged", "app") }).Should(Succeed())

		addEphemeral := func(ec corev1.EphemeralContainer) {
			Eventually(func(g Gomega) {
				p := getPod(g, "debugged")
				p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ec)
				g.Expect(admin.SubResource("ephemeralcontainers").Update(ctx, p)).To(Succeed())
			}).Should(Succeed())
		}
		addEphemeral(corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debugger", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent, Stdin: true, TTY: true,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		}, TargetContainerName: "app"})
		var debugger *runtimeapi.Container
		Eventually(func(g Gomega) {
			debugger = running(g, "debugged", "debugger")
			p := getPod(g, "debugged")
			g.Expect(p.Generation).To(BeEquivalentTo(2))
			g.Expect(p.Status.EphemeralContainerStatuses).To(HaveLen(1))
			st := p.Status.EphemeralContainerStatuses[0]
			g.Expect(st.Name).To(Equal("debugger"))
			g.Expect(st.State.Running).NotTo(BeNil())
			g.Expect(st.ContainerID).To(Equal("fake-runtime://" + debugger.Id))
		}, 10*time.Second).Should(Succeed())
		Expect(debugger.PodSandboxId).To(Equal(app.PodSandboxId), "it joins the pod's sandbox")
		Expect(debugger.Annotations[runtime.AnnotationContainerEphemeral]).To(Equal("true"))

		addEphemeral(corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debugger2", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		}})
		Eventually(func(g Gomega) {
			running(g, "debugged", "debugger2")
			g.Expect(getPod(g, "debugged").Status.EphemeralContainerStatuses).To(HaveLen(2))
		}, 10*time.Second).Should(Succeed())

		Expect(rt.ExitContainer(debugger.Id, 1, "")).To(Succeed())
		Eventually(func(g Gomega) {
			st := getPod(g, "debugged").Status.EphemeralContainerStatuses[0]
			g.Expect(st.State.Terminated).NotTo(BeNil())
			g.Expect(st.State.Terminated.ExitCode).To(BeEquivalentTo(1))
		}, 5*time.Second).Should(Succeed())
		// Never restarted: TestEphemeralContainerIsNeverRestarted checks it on the clock.
		Expect(attempts("debugged", "debugger")).To(HaveLen(1))
		Expect(running(Default, "debugged", "app").Id).To(Equal(app.Id), "the pod's own container is untouched")

		Expect(admin.Delete(ctx, busyboxPod(ns, "debugged", nodeName))).To(Succeed())
		Eventually(func(g Gomega) {
			err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "debugged"}, &corev1.Pod{})
			g.Expect(err).To(HaveOccurred())
			g.Expect(attempts("debugged", "debugger2")).To(BeEmpty())
		}, 10*time.Second).Should(Succeed())
	})

	// The upstream "Restartable Init Container Lifecycle Hook should execute prestop http hook properly"
	// pod: the second sidecar's preStop hook needs the first sidecar, which must stop after it.
	It("runs every preStop hook at once and stops sidecars after the main container, the last declared first", func() {
		always := ptr.To(corev1.ContainerRestartPolicyAlways)
		Expect(admin.Create(ctx, busyboxPod(ns, "sidecars", nodeName, func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{
				{Name: "container-redirect", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent, RestartPolicy: always},
				{Name: "hooked", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent, RestartPolicy: always,
					Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}},
			}
		}))).To(Succeed())
		ids := map[string]string{}
		Eventually(func(g Gomega) {
			for _, n := range []string{"container-redirect", "hooked", "app"} {
				ids[n] = running(g, "sidecars", n).Id
			}
		}, 10*time.Second).Should(Succeed())
		rt.ResetCalls()
		Expect(admin.Delete(ctx, busyboxPod(ns, "sidecars", nodeName))).To(Succeed())
		// The exit order is read from the runtime's record: the containers may be removed with the pod before
		// their status could be read.
		order := map[string]int{}
		Eventually(func(g Gomega) {
			exits := rt.Exits()
			for n, id := range ids {
				i := slices.Index(exits, id)
				g.Expect(i).To(BeNumerically(">=", 0), n+" exited")
				order[n] = i
			}
		}, 10*time.Second, 20*time.Millisecond).Should(Succeed())
		Expect(rt.Calls()).To(ContainElement("ExecSync"), "the preStop hook ran")
		Expect(order["hooked"]).To(BeNumerically(">", order["app"]), "sidecars stop after the main container")
		Expect(order["container-redirect"]).To(BeNumerically(">", order["hooked"]), "the first sidecar stops last")
	})
})

func readyCondition(p *corev1.Pod) corev1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c
		}
	}
	return corev1.PodCondition{}
}
