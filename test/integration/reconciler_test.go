package integration_test

import (
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
)

// podBed is a node agent under test: the whole agent (agent.New) over an in-memory runtime, running as
// the node's own identity.
type podBed struct {
	nodeName string
	rt       *fake.Runtime
	cri      *runtime.Client
	events   *record.FakeRecorder
	metrics  *prometheus.Registry
	// clk is the agent's clock: time passes for the agent only when a spec steps it.
	clk  *clocktesting.FakeClock
	stop func()
	// tracer, when set, takes the agent's spans.
	tracer trace.TracerProvider
}

func newPodBed(nodeName string, rt *fake.Runtime, cri *runtime.Client) *podBed {
	return newTracedPodBed(nodeName, rt, cri, nil)
}

// newTracedPodBed is newPodBed with the agent's spans going to tracer (nil: none).
func newTracedPodBed(nodeName string, rt *fake.Runtime, cri *runtime.Client, tracer trace.TracerProvider) *podBed {
	b := &podBed{nodeName: nodeName, rt: rt, cri: cri, events: record.NewFakeRecorder(1000),
		clk: clocktesting.NewFakeClock(time.Now()), tracer: tracer}
	b.start()
	return b
}

// start runs a fresh agent against the same runtime, built as main builds it (agent.New) with the node's
// own credentials, on a simulated machine of 2 CPUs and 4 GiB; it returns once the Node is Ready.
func (b *podBed) start() {
	root, err := os.MkdirTemp("", "nodelet-root")
	Expect(err).NotTo(HaveOccurred())
	cfg := config.Default(b.nodeName)
	cfg.RootDir, cfg.MetricsBindAddress = root, "0"
	cfg.NodeIPs = []net.IP{net.ParseIP("192.0.2.10")}
	kc := &cfg.Kubelet
	kc.ContainerRuntimeEndpoint = b.rt.Endpoint()
	kc.PodLogsDir = root + "/logs"
	kc.HealthzPort, kc.EnableServer = ptr.To(int32(0)), ptr.To(false)
	kc.ClusterDNS, kc.ClusterDomain = []string{"10.96.0.10"}, "cluster.local"
	ctx, cancel := context.WithCancel(context.Background())
	b.metrics = prometheus.NewRegistry()
	a, err := agent.New(ctx, agent.Options{
		Config: cfg, RestConfig: nodeConfig(b.nodeName), Recorder: b.events, Metrics: b.metrics, TracerProvider: b.tracer,
		Logger: ctrl.Log.WithName("agent"), Clock: b.clk,
		Platform: agent.Simulated(agent.Simulation{Machine: machine.Static{
			Facts: machine.Info{OS: "linux", Architecture: "amd64", NumCPU: 2, MemoryBytes: 4 << 30},
			Observed: machine.Signals{MemoryAvailableBytes: 3 << 30, NodeFsCapacityBytes: 100 << 30, NodeFsAvailableBytes: 90 << 30,
				NodeFsInodes: 1 << 20, NodeFsInodesFree: 1 << 19, PIDMax: 1 << 22, PIDsInUse: 100}}}),
	})
	Expect(err).NotTo(HaveOccurred())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(a.Run(ctx)).To(Succeed())
	}()
	var once sync.Once
	b.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			_ = os.RemoveAll(root)
		})
	}
	DeferCleanup(func() { b.stop() })
	Eventually(func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(admin.Get(context.Background(), types.NamespacedName{Name: b.nodeName}, n)).To(Succeed())
		g.Expect(n.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))))
	}).Should(Succeed())
}

// housekeepingPeriod is how often the agent looks for orphans and statuses someone else overwrote.
const housekeepingPeriod = 2 * time.Second

// step moves the agent's clock on by d.
func (b *podBed) step(d time.Duration) { b.clk.Step(d) }

// podSyncs is how many pod syncs the running agent has finished (kubelet_pod_worker_duration_seconds).
func (b *podBed) podSyncs() uint64 {
	families, err := b.metrics.Gather()
	Expect(err).NotTo(HaveOccurred())
	var n uint64
	for _, f := range families {
		if f.GetName() == "kubelet_pod_worker_duration_seconds" {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

func busyboxPod(ns, name, nodeName string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			TerminationGracePeriodSeconds: ptr.To(int64(30)),
			Containers: []corev1.Container{{
				Name: "app", Image: "busybox", Command: []string{"sleep", "3600"},
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// apiPod reads a pod from the API server as the admin.
func apiPod(ctx context.Context, g Gomega, ns, name string) *corev1.Pod {
	p := &corev1.Pod{}
	g.Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
	return p
}

// podContainers are the fake runtime's containers of the pod called podName.
func podContainers(rt *fake.Runtime, podName string) []*runtimeapi.Container {
	var out []*runtimeapi.Container
	for _, c := range rt.Containers() {
		if c.Labels[runtime.LabelPodName] == podName {
			out = append(out, c)
		}
	}
	return out
}

var _ = Describe("Pod reconciler", func() {
	var (
		ns       string
		nodeName string
		rt       *fake.Runtime
		bed      *podBed
		ctx      = context.Background()
	)

	getPod := func(g Gomega, name string) *corev1.Pod { return apiPod(ctx, g, ns, name) }
	containersOf := func(podName string) []*runtimeapi.Container { return podContainers(rt, podName) }
	runningContainer := func(g Gomega, podName, ctrName string) *runtimeapi.Container {
		for _, c := range containersOf(podName) {
			if c.Metadata.Name == ctrName && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return c
			}
		}
		g.Expect("no running container " + ctrName).To(BeEmpty())
		return nil
	}

	BeforeEach(func() {
		nodeName = "pods-" + utilrand.String(6)
		ns = "ns-" + utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		var cri *runtime.Client
		rt, cri = startFakeRuntime()
		rt.AddImage("docker.io/library/busybox:latest", 1<<20)
		rt.SetPullable("docker.io/library/busybox:latest", 1<<20)
		bed = newPodBed(nodeName, rt, cri)
	})

	It("runs a pod and reports it Running and Ready with its IP", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "web", nodeName))).To(Succeed())
		Eventually(func(g Gomega) {
			p := getPod(g, "web")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.PodIP).NotTo(BeEmpty())
			g.Expect(p.Status.HostIP).To(Equal("192.0.2.10"))
			g.Expect(p.Status.QOSClass).To(Equal(corev1.PodQOSBestEffort))
			g.Expect(p.Status.StartTime).NotTo(BeNil())
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			cs := p.Status.ContainerStatuses[0]
			g.Expect(cs.State.Running).NotTo(BeNil())
			g.Expect(cs.Ready).To(BeTrue())
			g.Expect(cs.ContainerID).To(HavePrefix("fake-runtime://"))
			g.Expect(podCondition(p, corev1.PodReady)).To(Equal(corev1.ConditionTrue))
			g.Expect(podCondition(p, corev1.PodReadyToStartContainers)).To(Equal(corev1.ConditionTrue))
		}).Should(Succeed())
	})

	DescribeTable("a restartPolicy Never pod ends in the phase its exit code says",
		func(code int32, phase corev1.PodPhase, reason string) {
			Expect(admin.Create(ctx, busyboxPod(ns, "job", nodeName, func(p *corev1.Pod) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
			}))).To(Succeed())
			var id string
			Eventually(func(g Gomega) { id = runningContainer(g, "job", "app").Id }).Should(Succeed())
			Expect(rt.ExitContainer(id, code, "")).To(Succeed())
			Eventually(func(g Gomega) {
				p := getPod(g, "job")
				g.Expect(p.Status.Phase).To(Equal(phase))
				t := p.Status.ContainerStatuses[0].State.Terminated
				g.Expect(t).NotTo(BeNil())
				g.Expect(t.ExitCode).To(Equal(code))
				g.Expect(t.Reason).To(Equal(reason))
			}).Should(Succeed())
			// Never restarted, however long after: TestNeverPodIsNotRestartedAfterItsExit on the clock.
			Expect(containersOf("job")).To(HaveLen(1))
		},
		Entry("exit 0", int32(0), corev1.PodSucceeded, "Completed"),
		Entry("exit 3", int32(3), corev1.PodFailed, "Error"),
	)

	It("restarts a crashing container and then backs off (CrashLoopBackOff)", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "crash", nodeName))).To(Succeed())
		for attempt := 0; attempt < 2; attempt++ {
			var c *runtimeapi.Container
			Eventually(func(g Gomega) {
				c = runningContainer(g, "crash", "app")
				g.Expect(c.Metadata.Attempt).To(BeEquivalentTo(attempt))
			}).Should(Succeed())
			Expect(rt.ExitContainer(c.Id, 1, "")).To(Succeed())
		}
		Eventually(func(g Gomega) {
			cs := getPod(g, "crash").Status.ContainerStatuses[0]
			g.Expect(cs.RestartCount).To(BeEquivalentTo(1))
			g.Expect(cs.State.Waiting).NotTo(BeNil())
			g.Expect(cs.State.Waiting.Reason).To(Equal("CrashLoopBackOff"))
			g.Expect(cs.LastTerminationState.Terminated).NotTo(BeNil())
			g.Expect(cs.LastTerminationState.Terminated.ExitCode).To(BeEquivalentTo(1))
		}).Should(Succeed())
	})

	It("rejects a pod that asks for more cpu than the node has (OutOfcpu)", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "big", nodeName, func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
		}))).To(Succeed())
		Eventually(func(g Gomega) {
			p := getPod(g, "big")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("OutOfcpu"))
			g.Expect(p.Status.Message).To(Equal("Pod was rejected: Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"))
		}).Should(Succeed())
		Expect(containersOf("big")).To(BeEmpty())
		Expect(rt.Sandboxes()).To(BeEmpty())
	})

	It("stops a deleted pod's containers and then removes the object", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "gone", nodeName))).To(Succeed())
		Eventually(func(g Gomega) { runningContainer(g, "gone", "app") }).Should(Succeed())
		Expect(admin.Delete(ctx, busyboxPod(ns, "gone", nodeName))).To(Succeed())
		Eventually(func(g Gomega) {
			err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gone"}, &corev1.Pod{})
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			g.Expect(err).To(HaveOccurred())
		}).Should(Succeed())
		Expect(containersOf("gone")).To(BeEmpty(), "containers removed")
		Expect(rt.Calls()).To(ContainElement("StopContainer"))
	})

	It("applies a shorter grace period at once", func() {
		rt.ScriptContainer("stubborn", fake.Behaviour{IgnoreSIGTERM: true})
		Expect(admin.Create(ctx, busyboxPod(ns, "slow", nodeName, func(p *corev1.Pod) {
			p.Spec.Containers[0].Name = "stubborn"
			p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(300))
		}))).To(Succeed())
		Eventually(func(g Gomega) { runningContainer(g, "slow", "stubborn") }).Should(Succeed())
		// That the 300 s are honoured until then is TestShorterGracePeriodTakesEffectAtOnce's, on the clock.
		Expect(admin.Delete(ctx, busyboxPod(ns, "slow", nodeName))).To(Succeed())
		Expect(admin.Delete(ctx, busyboxPod(ns, "slow", nodeName), client.GracePeriodSeconds(1))).To(Succeed())
		Eventually(func(g Gomega) {
			err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "slow"}, &corev1.Pod{})
			g.Expect(err).To(HaveOccurred())
		}, 10*time.Second).Should(Succeed())
	})

	It("does not let one pod's long grace period delay another pod", func() {
		rt.ScriptContainer("stubborn", fake.Behaviour{IgnoreSIGTERM: true})
		Expect(admin.Create(ctx, busyboxPod(ns, "slow", nodeName, func(p *corev1.Pod) {
			p.Spec.Containers[0].Name = "stubborn"
			p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(300))
		}))).To(Succeed())
		Eventually(func(g Gomega) { runningContainer(g, "slow", "stubborn") }).Should(Succeed())
		Expect(admin.Delete(ctx, busyboxPod(ns, "slow", nodeName))).To(Succeed())
		Expect(admin.Create(ctx, busyboxPod(ns, "fast", nodeName))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, "fast").Status.Phase).To(Equal(corev1.PodRunning))
		}, 5*time.Second).Should(Succeed())
		Expect(admin.Delete(ctx, busyboxPod(ns, "slow", nodeName), client.GracePeriodSeconds(0))).To(Succeed())
	})

	It("waits for the old UID's teardown before starting a pod reusing its name", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "reuse", nodeName))).To(Succeed())
		var old *runtimeapi.Container
		Eventually(func(g Gomega) { old = runningContainer(g, "reuse", "app") }).Should(Succeed())
		Expect(admin.Delete(ctx, busyboxPod(ns, "reuse", nodeName), client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(admin.Create(ctx, busyboxPod(ns, "reuse", nodeName))).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			p := getPod(g, "reuse")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			cs := containersOf("reuse")
			g.Expect(cs).To(HaveLen(1), "the old UID's container was removed")
			g.Expect(cs[0].Id).NotTo(Equal(old.Id))
			g.Expect(cs[0].Labels[runtime.LabelPodUID]).To(Equal(string(p.UID)))
		}).Should(Succeed())
	})

	It("removes sandboxes and containers of pods that no longer exist", func() {
		// A pod left in the runtime by an earlier run, with no API object.
		sb, err := bed.cri.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "ghost", Namespace: ns, Uid: "ghost-uid"},
			Labels:   map[string]string{runtime.LabelPodName: "ghost", runtime.LabelPodNamespace: ns, runtime.LabelPodUID: "ghost-uid"},
		}, "")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() []*runtimeapi.PodSandbox {
			bed.step(housekeepingPeriod) // orphans are looked for every housekeeping period
			var out []*runtimeapi.PodSandbox
			for _, s := range rt.Sandboxes() {
				if s.Id == sb {
					out = append(out, s)
				}
			}
			return out
		}, 10*time.Second).Should(BeEmpty())
	})

	It("restarts no container and keeps restart counts when the agent restarts", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "keep", nodeName))).To(Succeed())
		var first *runtimeapi.Container
		Eventually(func(g Gomega) { first = runningContainer(g, "keep", "app") }).Should(Succeed())
		Expect(rt.ExitContainer(first.Id, 1, "")).To(Succeed())
		var second *runtimeapi.Container
		Eventually(func(g Gomega) {
			second = runningContainer(g, "keep", "app")
			g.Expect(getPod(g, "keep").Status.ContainerStatuses[0].RestartCount).To(BeEquivalentTo(1))
		}).Should(Succeed())
		bed.stop()
		rt.ResetCalls()
		bed.start()
		// The new agent has decided once it has synced the pod (its only pod) twice (a start under load,
		// -race and a bed beside it, may take longer than the default wait).
		Eventually(bed.podSyncs).WithTimeout(20 * time.Second).Should(BeNumerically(">=", 2))
		Expect(runningContainer(Default, "keep", "app").Id).To(Equal(second.Id))
		Expect(apiPod(ctx, Default, ns, "keep").Status.ContainerStatuses[0].RestartCount).To(BeEquivalentTo(1))
		Expect(rt.Calls()).NotTo(ContainElement("StartContainer"))
		Expect(rt.Calls()).NotTo(ContainElement("StopContainer"))
	})

	It("reports a missing image as ErrImagePull, then ImagePullBackOff", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "noimg", nodeName, func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = "example.com/missing:1"
		}))).To(Succeed())
		// ErrImagePull shows until the next sync, which may come at once (a PLEG event): check the
		// kubelet's event for it, and the status for the back-off that follows.
		Eventually(bed.events.Events, 20*time.Second).Should(Receive(Equal("Warning Failed Error: ErrImagePull")))
		Eventually(func(g Gomega) {
			cs := getPod(g, "noimg").Status.ContainerStatuses
			g.Expect(cs).To(HaveLen(1))
			g.Expect(cs[0].State.Waiting).NotTo(BeNil())
			g.Expect(cs[0].State.Waiting.Reason).To(Equal("ImagePullBackOff"))
			g.Expect(cs[0].State.Waiting.Message).To(Equal(`Back-off pulling image "example.com/missing:1"`))
		}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	})

	It("fails a pod that outlives activeDeadlineSeconds with DeadlineExceeded and stops it", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "deadline", nodeName, func(p *corev1.Pod) {
			p.Spec.ActiveDeadlineSeconds = ptr.To(int64(2))
		}))).To(Succeed())
		Eventually(func(g Gomega) { runningContainer(g, "deadline", "app") }).Should(Succeed())
		Eventually(func(g Gomega) {
			bed.step(time.Second) // the deadline passes on the agent's clock
			p := getPod(g, "deadline")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("DeadlineExceeded"))
			g.Expect(p.Status.Message).To(Equal("Pod was active on the node longer than the specified deadline"))
			for _, c := range containersOf("deadline") {
				g.Expect(c.State).NotTo(Equal(runtimeapi.ContainerState_CONTAINER_RUNNING))
			}
		}, 15*time.Second).Should(Succeed())
	})

	It("kills a container whose postStart hook fails (FailedPostStartHook)", func() {
		rt.SetExecResult("hooked", nil, []byte("boom"), 1)
		Expect(admin.Create(ctx, busyboxPod(ns, "hook", nodeName, func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Spec.Containers[0].Name = "hooked"
			p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
				Exec: &corev1.ExecAction{Command: []string{"false"}}}}
		}))).To(Succeed())
		Eventually(func(g Gomega) {
			p := getPod(g, "hook")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
		}, 15*time.Second).Should(Succeed())
		Eventually(bed.events.Events).Should(Receive(ContainSubstring("FailedPostStartHook")))
	})

	It("runs init containers in order before the app, and keeps a sidecar running", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "init", nodeName, func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{
				{Name: "first", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent},
				{Name: "sidecar", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent,
					RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
				{Name: "second", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent},
			}
		}))).To(Succeed())
		var first *runtimeapi.Container
		Eventually(func(g Gomega) { first = runningContainer(g, "init", "first") }).Should(Succeed())
		Eventually(func(g Gomega) {
			p := getPod(g, "init")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(podCondition(p, corev1.PodInitialized)).To(Equal(corev1.ConditionFalse))
		}).Should(Succeed())
		// Nothing else starts while the first init container runs (TestStartOrderSandboxInitSidecarApp
		// checks it sync by sync).
		Expect(containersOf("init")).To(HaveLen(1))
		Expect(rt.ExitContainer(first.Id, 0, "")).To(Succeed())
		var second *runtimeapi.Container
		Eventually(func(g Gomega) {
			runningContainer(g, "init", "sidecar")
			second = runningContainer(g, "init", "second")
		}).Should(Succeed())
		Expect(rt.ExitContainer(second.Id, 0, "")).To(Succeed())
		Eventually(func(g Gomega) {
			runningContainer(g, "init", "app")
			runningContainer(g, "init", "sidecar")
			p := getPod(g, "init")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(podCondition(p, corev1.PodInitialized)).To(Equal(corev1.ConditionTrue))
		}).Should(Succeed())
		order := []string{}
		for _, c := range containersOf("init") {
			order = append(order, c.Metadata.Name)
		}
		Expect(strings.Join(order, ",")).To(ContainSubstring("first"))
	})
})

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}
