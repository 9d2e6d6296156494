package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/runtime"
)

// newNamespace creates a namespace for one spec and waits for its default ServiceAccount.
func newNamespace() string {
	ns := "e2e-" + utilrand.String(6)
	Expect(k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	// The controller-manager makes the ServiceAccount; the upstream e2e framework waits up to two minutes for it.
	Eventually(func() error {
		return k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
	}, 2*time.Minute).Should(Succeed(), "the default ServiceAccount of namespace %s", ns)
	DeferCleanup(func() {
		_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	return ns
}

// shPod is a busybox pod on this node running script in sh.
func shPod(ns, name, script string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(5)),
			Containers: []corev1.Container{{
				Name: "main", Image: "busybox", Command: []string{"sh", "-c", script},
			}},
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func getPod(g Gomega, ns, name string) *corev1.Pod {
	p := &corev1.Pod{}
	g.Expect(k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
	return p
}

func create(p *corev1.Pod) *corev1.Pod {
	Expect(k8s.Create(context.Background(), p)).To(Succeed())
	return p
}

// waitGone waits until the pod object is deleted and returns how long that took.
func waitGone(ns, name string, limit time.Duration) time.Duration {
	start := time.Now()
	Eventually(func() bool {
		err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &corev1.Pod{})
		return apierrors.IsNotFound(err)
	}, limit, 50*time.Millisecond).Should(BeTrue())
	return time.Since(start)
}

// runtimeContainers lists the CRI containers of a pod UID.
func runtimeContainers(uid types.UID) []*runtimeapi.Container {
	cs, err := cri.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{runtime.LabelPodUID: string(uid)}})
	Expect(err).NotTo(HaveOccurred())
	return cs
}

// containerLog reads a container's CRI log file on the node.
func containerLog(p *corev1.Pod, container string, attempt int) string {
	path := filepath.Join(bedDir, "logs", "pods", fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), container, fmt.Sprintf("%d.log", attempt))
	b, _ := os.ReadFile(path)
	return string(b)
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

var _ = Describe("Pods on containerd", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("runs a busybox pod and reports it Running with a pod IP", func() {
		start := time.Now()
		create(shPod(ns, "web", "sleep 3600"))
		Eventually(func(g Gomega) {
			p := getPod(g, ns, "web")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.PodIP).To(HavePrefix("10.88."))
			g.Expect(podCondition(p, corev1.PodReady)).To(Equal(corev1.ConditionTrue))
			g.Expect(p.Status.ContainerStatuses[0].ContainerID).To(HavePrefix("containerd://"))
			g.Expect(p.Status.ContainerStatuses[0].ImageID).To(ContainSubstring("sha256:"))
		}, 30*time.Second, 50*time.Millisecond).Should(Succeed())
		report("pod create → Running %.2fs", time.Since(start).Seconds())
	})

	It("runs a pod placed by the scheduler", func() {
		create(shPod(ns, "scheduled", "sleep 3600", func(p *corev1.Pod) { p.Spec.NodeName = "" }))
		Eventually(func(g Gomega) {
			p := getPod(g, ns, "scheduled")
			g.Expect(p.Spec.NodeName).To(Equal(nodeName))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}, 60*time.Second).Should(Succeed())
	})

	DescribeTable("a restartPolicy Never pod ends in the phase its exit code says",
		func(code int, phase corev1.PodPhase, reason string) {
			create(shPod(ns, "job", fmt.Sprintf("exit %d", code), func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }))
			Eventually(func(g Gomega) {
				p := getPod(g, ns, "job")
				g.Expect(p.Status.Phase).To(Equal(phase))
				t := p.Status.ContainerStatuses[0].State.Terminated
				g.Expect(t).NotTo(BeNil())
				g.Expect(t.ExitCode).To(BeEquivalentTo(code))
				g.Expect(t.Reason).To(Equal(reason))
			}, 30*time.Second).Should(Succeed())
		},
		Entry("exit 0 → Succeeded", 0, corev1.PodSucceeded, "Completed"),
		Entry("exit 3 → Failed", 3, corev1.PodFailed, "Error"),
	)

	It("puts a crashing container in CrashLoopBackOff with a growing restartCount", func() {
		create(shPod(ns, "crash", "exit 1"))
		Eventually(func(g Gomega) {
			statuses := getPod(g, ns, "crash").Status.ContainerStatuses
			g.Expect(statuses).To(HaveLen(1))
			cs := statuses[0]
			g.Expect(cs.RestartCount).To(BeNumerically(">=", 2))
			g.Expect(cs.State.Waiting).NotTo(BeNil())
			g.Expect(cs.State.Waiting.Reason).To(Equal("CrashLoopBackOff"))
			g.Expect(cs.LastTerminationState.Terminated.ExitCode).To(BeEquivalentTo(1))
		}, 90*time.Second, 250*time.Millisecond).Should(Succeed())
	})

	It("runs init containers in order and keeps a sidecar running", func() {
		p := create(shPod(ns, "init", "sleep 3600", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{
				{Name: "one", Image: "busybox", Command: []string{"sh", "-c", "echo one; sleep 1"}},
				{Name: "sidecar", Image: "busybox", Command: []string{"sh", "-c", "sleep 3600"},
					RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
				{Name: "two", Image: "busybox", Command: []string{"sh", "-c", "echo two"}},
			}
		}))
		Eventually(func(g Gomega) {
			got := getPod(g, ns, "init")
			g.Expect(got.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(podCondition(got, corev1.PodInitialized)).To(Equal(corev1.ConditionTrue))
			p = got
		}, 60*time.Second).Should(Succeed())
		started := map[string]time.Time{}
		for _, s := range p.Status.InitContainerStatuses {
			switch {
			case s.State.Terminated != nil:
				started[s.Name] = s.State.Terminated.StartedAt.Time
			case s.State.Running != nil:
				started[s.Name] = s.State.Running.StartedAt.Time
			}
		}
		Expect(started["one"].After(started["sidecar"])).To(BeFalse())
		Expect(started["two"].Before(started["sidecar"])).To(BeFalse())
		sidecar := p.Status.InitContainerStatuses[1]
		Expect(sidecar.State.Running).NotTo(BeNil(), "the sidecar keeps running")
		Expect(p.Status.InitContainerStatuses[2].State.Terminated.Reason).To(Equal("Completed"))
	})

	It("makes a postStart hook's effect visible and runs a preStop hook before SIGTERM", func() {
		// activeDeadlineSeconds ends the pod without deleting it, so its container log stays to be read.
		p := create(shPod(ns, "hooks",
			`trap 'echo got-TERM; exit 0' TERM; while [ ! -f /tmp/started ]; do sleep 0.1; done; cat /tmp/started; while true; do sleep 0.2; done`,
			func(p *corev1.Pod) {
				p.Spec.ActiveDeadlineSeconds = ptr.To(int64(6))
				p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{
					PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo post-start-ran > /tmp/started"}}},
					PreStop:   &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo pre-stop-ran > /proc/1/fd/1"}}},
				}
			}))
		Eventually(func(g Gomega) {
			p = getPod(g, ns, "hooks")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(containerLog(p, "main", 0)).To(ContainSubstring("post-start-ran"))
		}, 30*time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, "hooks").Status.Reason).To(Equal("DeadlineExceeded"))
		}, 30*time.Second).Should(Succeed())
		log := containerLog(p, "main", 0)
		Expect(log).To(ContainSubstring("got-TERM"))
		Expect(strings.Index(log, "pre-stop-ran")).To(BeNumerically(">=", 0))
		Expect(strings.Index(log, "pre-stop-ran")).To(BeNumerically("<", strings.Index(log, "got-TERM")))
	})

	It("gives a container that traps SIGTERM its grace period and kills one that ignores it at the end", func() {
		create(shPod(ns, "polite", `trap 'sleep 2; exit 0' TERM; while true; do sleep 0.2; done`))
		create(shPod(ns, "stubborn", `trap '' TERM; while true; do sleep 0.2; done`))
		for _, name := range []string{"polite", "stubborn"} {
			Eventually(func(g Gomega) { g.Expect(getPod(g, ns, name).Status.Phase).To(Equal(corev1.PodRunning)) }, 30*time.Second).Should(Succeed())
		}
		type gone struct {
			name string
			d    time.Duration
		}
		results := make(chan gone, 2)
		for _, name := range []string{"polite", "stubborn"} {
			Expect(k8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
		}
		for _, name := range []string{"polite", "stubborn"} {
			go func() {
				defer GinkgoRecover()
				results <- gone{name, waitGone(ns, name, 20*time.Second)}
			}()
		}
		took := map[string]time.Duration{}
		for range 2 {
			r := <-results
			took[r.name] = r.d
		}
		report("delete → gone: SIGTERM-trapping pod %.2fs, SIGTERM-ignoring pod %.2fs (grace 5s)",
			took["polite"].Seconds(), took["stubborn"].Seconds())
		Expect(took["polite"]).To(BeNumerically(">=", 2*time.Second))
		Expect(took["polite"]).To(BeNumerically("<", 5*time.Second))
		Expect(took["stubborn"]).To(BeNumerically(">=", 5*time.Second))
		Expect(took["stubborn"]).To(BeNumerically("<", 9*time.Second))
	})

	It("reports a missing image as ErrImagePull and then ImagePullBackOff", func() {
		create(shPod(ns, "noimg", "true", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "docker.io/library/does-not-exist:1" }))
		// ErrImagePull shows until the next sync; the kubelet's events record it for good.
		Eventually(func(g Gomega) {
			events := &corev1.EventList{}
			g.Expect(k8s.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range events.Items {
				reasons = append(reasons, e.Reason+": "+e.Message)
			}
			g.Expect(reasons).To(ContainElement("Failed: Error: ErrImagePull"))
			g.Expect(reasons).To(ContainElement(`BackOff: Back-off pulling image "docker.io/library/does-not-exist:1"`))
			cs := getPod(g, ns, "noimg").Status.ContainerStatuses
			g.Expect(cs).To(HaveLen(1))
			g.Expect(cs[0].State.Waiting).NotTo(BeNil())
			g.Expect(cs[0].State.Waiting.Reason).To(BeElementOf("ErrImagePull", "ImagePullBackOff"))
		}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, "noimg").Status.ContainerStatuses[0].State.Waiting.Reason).To(Equal("ImagePullBackOff"))
		}, 30*time.Second).Should(Succeed())
	})

	It("rejects a pod that requests more cpu than allocatable with OutOfcpu", func() {
		create(shPod(ns, "big", "sleep 3600", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}
		}))
		Eventually(func(g Gomega) {
			p := getPod(g, ns, "big")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("OutOfcpu"))
			g.Expect(p.Status.Message).To(HavePrefix("Pod was rejected: Node didn't have enough resource: cpu, requested: 64000"))
		}, 30*time.Second).Should(Succeed())
	})

	It("stops the containers of a pod whose object was force-deleted", func() {
		create(shPod(ns, "forced", "sleep 3600"))
		Eventually(func(g Gomega) { g.Expect(getPod(g, ns, "forced").Status.Phase).To(Equal(corev1.PodRunning)) }, 30*time.Second).Should(Succeed())
		p := getPod(Default, ns, "forced")
		Expect(k8s.Delete(context.Background(), p, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func() []*runtimeapi.Container { return runtimeContainers(p.UID) }, 20*time.Second).Should(BeEmpty())
	})
})

var _ = Describe("Agent restart", Ordered, func() {
	It("restarts no container of 5 running pods when nodelet restarts", func() {
		ns := newNamespace()
		for i := range 5 {
			create(shPod(ns, fmt.Sprintf("keep-%d", i), "sleep 3600"))
		}
		ids := map[string]string{}
		Eventually(func(g Gomega) {
			for i := range 5 {
				p := getPod(g, ns, fmt.Sprintf("keep-%d", i))
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
				ids[p.Name] = p.Status.ContainerStatuses[0].ContainerID
			}
		}, 60*time.Second).Should(Succeed())
		bed("stop", "nodelet")
		bed("start", "nodelet")
		Consistently(func(g Gomega) {
			for i := range 5 {
				p := getPod(g, ns, fmt.Sprintf("keep-%d", i))
				cs := p.Status.ContainerStatuses[0]
				g.Expect(cs.ContainerID).To(Equal(ids[p.Name]))
				g.Expect(cs.RestartCount).To(BeZero())
				g.Expect(cs.State.Running).NotTo(BeNil())
			}
		}, 8*time.Second, 500*time.Millisecond).Should(Succeed())
	})
})
