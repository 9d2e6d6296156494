package controllers_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/controllers"
	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
)

// fakeMachine is a host whose signals a test sets.
type fakeMachine struct {
	mu      sync.Mutex
	signals machine.Signals
}

func (m *fakeMachine) Info() (machine.Info, error) {
	return machine.Info{MachineID: "m-1", SystemUUID: "uuid-1", BootID: "boot-1", KernelVersion: "6.1.0",
		OSImage: "Debian GNU/Linux 12 (bookworm)", OS: "linux", Architecture: "amd64",
		NumCPU: 4, MemoryBytes: 8 << 30, HugePages: map[int64]int64{2 << 20: 0}}, nil
}

func (m *fakeMachine) Signals() (machine.Signals, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.signals, nil
}

// fakePressure is the eviction manager's pressure conditions, set by the spec.
type fakePressure struct {
	mu         sync.Mutex
	conditions []corev1.NodeConditionType
}

func (p *fakePressure) set(cs ...corev1.NodeConditionType) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conditions = cs
}

func (p *fakePressure) NodeConditions() []corev1.NodeConditionType {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]corev1.NodeConditionType(nil), p.conditions...)
}

func healthySignals() machine.Signals {
	return machine.Signals{MemoryAvailableBytes: 6 << 30, NodeFsCapacityBytes: 100 << 30,
		NodeFsAvailableBytes: 60 << 30, NodeFsInodes: 1 << 20, NodeFsInodesFree: 1 << 19,
		PIDMax: 32768, PIDsInUse: 200}
}

// fakeVolumes is the volume manager's side of volumesInUse.
type fakeVolumes struct {
	mu       sync.Mutex
	inUse    []corev1.UniqueVolumeName
	reported []corev1.UniqueVolumeName
}

func (f *fakeVolumes) VolumesInUse() []corev1.UniqueVolumeName {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]corev1.UniqueVolumeName(nil), f.inUse...)
}

func (f *fakeVolumes) MarkVolumesReportedInUse(names []corev1.UniqueVolumeName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reported = names
}

func (f *fakeVolumes) set(names ...corev1.UniqueVolumeName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inUse = names
}

func (f *fakeVolumes) lastReported() []corev1.UniqueVolumeName {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reported
}

var _ = Describe("Node reconciler", func() {
	var (
		r        *controllers.NodeReconciler
		vols     *fakeVolumes
		nodeName string
		clk      *clocktesting.FakeClock
		rt       *fake.Runtime
		host     *fakeMachine
		pressure *fakePressure
		events   *record.FakeRecorder
	)

	getNode := func(g Gomega) *corev1.Node {
		n := &corev1.Node{}
		g.Expect(admin.Get(context.Background(), types.NamespacedName{Name: nodeName}, n)).To(Succeed())
		return n
	}
	condition := func(n *corev1.Node, t corev1.NodeConditionType) corev1.NodeCondition {
		for _, c := range n.Status.Conditions {
			if c.Type == t {
				return c
			}
		}
		return corev1.NodeCondition{}
	}
	// tick moves the fake clock one update period.
	tick := func() { clk.Step(10 * time.Second) }
	// tickUntil moves the fake clock an update period at a time until check passes.
	tickUntil := func(check func(g Gomega)) {
		Eventually(func(g Gomega) {
			tick()
			check(g)
		}).Should(Succeed())
	}

	BeforeEach(func() {
		nodeName = "node-" + utilrand.String(6)
		clk = clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		host = &fakeMachine{signals: healthySignals()}
		pressure = &fakePressure{}
		events = record.NewFakeRecorder(100)
		var cri *runtime.Client
		rt, cri = startFakeRuntime(fake.WithClock(clk), fake.WithVersion("containerd", "1.6.20"))
		rt.AddImage("docker.io/library/busybox:latest", 1<<20)
		hard, err := config.ParseThresholds(map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"})
		Expect(err).NotTo(HaveOccurred())
		mgr := newNodeManager(nodeName)
		vols = &fakeVolumes{}
		r = &controllers.NodeReconciler{
			Client: mgr.GetClient(), Recorder: events, Runtime: cri, Machine: host, Clock: clk,
			NodeName: nodeName, Hostname: nodeName, NodeIPs: []net.IP{net.ParseIP("192.0.2.10")},
			Labels:  map[string]string{"node.kubernetes.io/pool": "blue"},
			Taints:  []corev1.Taint{{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}},
			MaxPods: 110, MaxImages: 50, Port: 10250, ProviderID: "kind://docker/kind/" + nodeName,
			Reserved:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			HardEviction:    hard,
			KubeletVersion:  "v1.37.1+nodelet",
			UpdateFrequency: 10 * time.Second, ReportFrequency: 5 * time.Minute,
			Pressure: pressure, Volumes: vols,
		}
		Expect(r.SetupWithManager(mgr)).To(Succeed())
		startManager(mgr)
	})

	It("registers the node with its identity, labels, taints, addresses and capacity", func() {
		Eventually(func(g Gomega) {
			n := getNode(g)
			g.Expect(n.Labels).To(HaveKeyWithValue(corev1.LabelHostname, nodeName))
			g.Expect(n.Labels).To(HaveKeyWithValue(corev1.LabelOSStable, "linux"))
			g.Expect(n.Labels).To(HaveKey(corev1.LabelArchStable))
			g.Expect(n.Labels).To(HaveKeyWithValue("node.kubernetes.io/pool", "blue"))
			g.Expect(n.Spec.Taints).To(ContainElement(HaveField("Key", "example.com/dedicated")))
			g.Expect(n.Spec.ProviderID).To(Equal("kind://docker/kind/" + nodeName))
			g.Expect(n.Status.Addresses).To(ConsistOf(
				corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.10"},
				corev1.NodeAddress{Type: corev1.NodeHostName, Address: nodeName}))
			g.Expect(n.Status.DaemonEndpoints.KubeletEndpoint.Port).To(BeEquivalentTo(10250))
			info := n.Status.NodeInfo
			g.Expect(info.ContainerRuntimeVersion).To(Equal("containerd://1.6.20"))
			g.Expect(info.KubeletVersion).To(Equal("v1.37.1+nodelet"))
			g.Expect(info.MachineID).To(Equal("m-1"))
			g.Expect(info.BootID).To(Equal("boot-1"))
			g.Expect(info.OSImage).To(Equal("Debian GNU/Linux 12 (bookworm)"))
			capa, alloc := n.Status.Capacity, n.Status.Allocatable
			g.Expect(capa.Cpu().String()).To(Equal("4"))
			g.Expect(capa.Memory().Value()).To(BeEquivalentTo(int64(8 << 30)))
			g.Expect(capa.Pods().Value()).To(BeEquivalentTo(110))
			g.Expect(capa.StorageEphemeral().Value()).To(BeEquivalentTo(int64(100 << 30)))
			g.Expect(alloc.Cpu().String()).To(Equal("3500m"))
			g.Expect(alloc.Memory().Value()).To(BeEquivalentTo(int64(8<<30 - 1<<30 - 100<<20)))
			g.Expect(alloc.StorageEphemeral().Value()).To(BeEquivalentTo(int64(90 << 30)))
			g.Expect(n.Status.Images).To(ContainElement(HaveField("Names", ContainElement("docker.io/library/busybox:latest"))))
		}).Should(Succeed())
	})

	It("reports Ready with the kubelet's reasons and no pressure", func() {
		Eventually(func(g Gomega) {
			n := getNode(g)
			g.Expect(condition(n, corev1.NodeReady)).To(And(
				HaveField("Status", corev1.ConditionTrue), HaveField("Reason", "KubeletReady"),
				HaveField("Message", "kubelet is posting ready status")))
			g.Expect(condition(n, corev1.NodeMemoryPressure)).To(And(
				HaveField("Status", corev1.ConditionFalse), HaveField("Reason", "KubeletHasSufficientMemory")))
			g.Expect(condition(n, corev1.NodeDiskPressure)).To(HaveField("Reason", "KubeletHasNoDiskPressure"))
			g.Expect(condition(n, corev1.NodePIDPressure)).To(HaveField("Reason", "KubeletHasSufficientPID"))
		}).Should(Succeed())
		Eventually(events.Events).Should(Receive(ContainSubstring("NodeReady")))
	})

	It("turns NotReady when the runtime's network is not ready, and Ready again", func() {
		Eventually(func(g Gomega) {
			g.Expect(condition(getNode(g), corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
		}).Should(Succeed())
		rt.SetNetworkReady(false, "NetworkPluginNotReady", "cni plugin not initialized")
		tickUntil(func(g Gomega) {
			c := condition(getNode(g), corev1.NodeReady)
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Reason).To(Equal("KubeletNotReady"))
			g.Expect(c.Message).To(Equal("container runtime network not ready: NetworkReady=false " +
				"reason:NetworkPluginNotReady message:cni plugin not initialized"))
		})
		rt.SetNetworkReady(true, "", "")
		tickUntil(func(g Gomega) {
			g.Expect(condition(getNode(g), corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
		})
	})

	It("turns NotReady when the runtime stops answering", func() {
		Eventually(func(g Gomega) {
			g.Expect(condition(getNode(g), corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
		}).Should(Succeed())
		rt.InjectError("Version", status.Error(codes.Unavailable, "connection refused"))
		tickUntil(func(g Gomega) {
			c := condition(getNode(g), corev1.NodeReady)
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Message).To(HavePrefix("container runtime is down"))
			// What the node last knew of the runtime stays.
			g.Expect(getNode(g).Status.NodeInfo.ContainerRuntimeVersion).To(Equal("containerd://1.6.20"))
		})
		rt.InjectError("Version", nil)
		tickUntil(func(g Gomega) {
			g.Expect(condition(getNode(g), corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
		})
	})

	It("reports the eviction manager's memory, disk and PID pressure with the kubelet's reasons and events", func() {
		Eventually(func(g Gomega) {
			g.Expect(condition(getNode(g), corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
		}).Should(Succeed())
		pressure.set(corev1.NodeMemoryPressure, corev1.NodeDiskPressure)
		tick()
		Eventually(func(g Gomega) {
			n := getNode(g)
			g.Expect(condition(n, corev1.NodeMemoryPressure)).To(And(
				HaveField("Status", corev1.ConditionTrue), HaveField("Reason", "KubeletHasInsufficientMemory")))
			g.Expect(condition(n, corev1.NodeDiskPressure)).To(And(
				HaveField("Status", corev1.ConditionTrue), HaveField("Reason", "KubeletHasDiskPressure")))
			g.Expect(condition(n, corev1.NodePIDPressure).Status).To(Equal(corev1.ConditionFalse))
		}).Should(Succeed())
		Eventually(events.Events).Should(Receive(ContainSubstring("NodeHasInsufficientMemory")))
		pressure.set()
		tickUntil(func(g Gomega) {
			g.Expect(condition(getNode(g), corev1.NodeMemoryPressure)).To(And(
				HaveField("Status", corev1.ConditionFalse), HaveField("Reason", "KubeletHasSufficientMemory")))
		})
	})

	It("writes the status only on change or when the report period has passed", func() {
		var first metav1.Time
		Eventually(func(g Gomega) {
			first = condition(getNode(g), corev1.NodeReady).LastHeartbeatTime
			g.Expect(first.IsZero()).To(BeFalse())
		}).Should(Succeed())
		tick()
		Consistently(func(g Gomega) {
			g.Expect(condition(getNode(g), corev1.NodeReady).LastHeartbeatTime).To(Equal(first))
		}, "500ms").Should(Succeed())
		tickUntil(func(g Gomega) {
			g.Expect(condition(getNode(g), corev1.NodeReady).LastHeartbeatTime.After(first.Time)).To(BeTrue())
		})
		Expect(clk.Since(first.Time)).To(BeNumerically(">=", 5*time.Minute))
	})

	It("writes volumesInUse as soon as it is triggered, and tells the volume manager what it wrote", func() {
		Eventually(func(g Gomega) {
			g.Expect(condition(getNode(g), corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
		}).Should(Succeed())
		vol := corev1.UniqueVolumeName("kubernetes.io/csi/hostpath.csi.k8s.io^vol-1")
		vols.set(vol)
		r.Trigger() // no clock step: the volume manager's change is written at once
		Eventually(func(g Gomega) {
			g.Expect(getNode(g).Status.VolumesInUse).To(Equal([]corev1.UniqueVolumeName{vol}))
			g.Expect(vols.lastReported()).To(Equal([]corev1.UniqueVolumeName{vol}))
		}).Should(Succeed())
		vols.set()
		r.Trigger()
		Eventually(func(g Gomega) {
			g.Expect(getNode(g).Status.VolumesInUse).To(BeEmpty())
			g.Expect(vols.lastReported()).To(BeEmpty())
		}).Should(Succeed())
	})

	It("records the kubelet's node events: Starting, a cordon and an uncordon, a reboot", func() {
		Eventually(func(g Gomega) { getNode(g) }).Should(Succeed())
		// seen waits for the event, the node's status evaluated every tick.
		seen := func(want string) {
			Eventually(func() string {
				tick()
				select {
				case e := <-events.Events:
					return e
				case <-time.After(100 * time.Millisecond):
					return ""
				}
			}).Should(Equal(want))
		}
		seen("Normal Starting Starting kubelet.")
		setUnschedulable := func(v bool) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
			patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, v)
			Expect(admin.Patch(context.Background(), n, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
		}
		setUnschedulable(true)
		seen("Normal NodeNotSchedulable Node " + nodeName + " status is now: NodeNotSchedulable")
		setUnschedulable(false)
		seen("Normal NodeSchedulable Node " + nodeName + " status is now: NodeSchedulable")

		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
		Expect(admin.Status().Patch(context.Background(), n,
			client.RawPatch(types.MergePatchType, []byte(`{"status":{"nodeInfo":{"bootID":"boot-0"}}}`)))).To(Succeed())
		seen("Warning Rebooted Node " + nodeName + " has been rebooted, boot id: boot-1")
	})

	It("registers the node again after it was deleted", func() {
		Eventually(func(g Gomega) { getNode(g) }).Should(Succeed())
		Expect(admin.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})).To(Succeed())
		Eventually(func(g Gomega) {
			n := getNode(g)
			g.Expect(n.DeletionTimestamp).To(BeNil())
			g.Expect(condition(n, corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
		}).Should(Succeed())
	})
})
