package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/devices/checkpoint"
)

// sampleResource is what the upstream sample device plugin advertises: two devices, Dev-1 and Dev-2, each
// given to a container as a mount of /tmp/<ID>.
const sampleResource corev1.ResourceName = "example.com/resource"

// agentRoot is the bed agent's root directory.
func agentRoot() string {
	if r := os.Getenv("AGENT_ROOT"); r != "" {
		return r
	}
	return filepath.Join(bedDir, "nodelet", "root")
}

// devicePluginPod runs the upstream sample device plugin on this node, its registration directory the
// agent's device plugin directory.
func devicePluginPod(ns string) *corev1.Pod {
	p := shPod(ns, "sample-device-plugin", "")
	p.Spec.Containers[0] = corev1.Container{
		Name: "plugin", Image: "registry.k8s.io/e2e-test-images/sample-device-plugin:1.7",
		VolumeMounts: []corev1.VolumeMount{{Name: "device-plugins", MountPath: "/var/lib/kubelet/device-plugins"}},
	}
	p.Spec.Volumes = []corev1.Volume{{Name: "device-plugins", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(agentRoot(), "device-plugins"), Type: ptr.To(corev1.HostPathDirectory)}}}}
	return p
}

// devicePod runs script in a busybox container that asks for n sample devices.
func devicePod(ns, name string, n int64, script string) *corev1.Pod {
	return shPod(ns, name, script, func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{sampleResource: *resource.NewQuantity(n, resource.DecimalSI)}
	})
}

// sampleDevices are the node's capacity and allocatable of the sample resource (-1: absent).
func sampleDevices(g Gomega) (capacity, allocatable int64) {
	n := getNode(g)
	capacity, allocatable = -1, -1
	if q, ok := n.Status.Capacity[sampleResource]; ok {
		capacity = q.Value()
	}
	if q, ok := n.Status.Allocatable[sampleResource]; ok {
		allocatable = q.Value()
	}
	return capacity, allocatable
}

// podResourcesCall calls the agent's pod resources API.
func podResourcesCall[T any](g Gomega, call func(context.Context, podresourcesapi.PodResourcesListerClient) (T, error)) T {
	conn, err := grpc.NewClient("unix://"+filepath.Join(agentRoot(), "pod-resources", "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := call(ctx, podresourcesapi.NewPodResourcesListerClient(conn))
	g.Expect(err).NotTo(HaveOccurred())
	return resp
}

// allocatableDevices are the healthy devices the agent has (GetAllocatableResources).
func allocatableDevices(g Gomega) int {
	resp := podResourcesCall(g, func(ctx context.Context, c podresourcesapi.PodResourcesListerClient) (*podresourcesapi.AllocatableResourcesResponse, error) {
		return c.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
	})
	return len(resp.GetDevices())
}

// podResources asks the agent's pod resources API for a pod's devices of the sample resource.
func podResources(ns, name string) []string {
	resp := podResourcesCall(Default, func(ctx context.Context, c podresourcesapi.PodResourcesListerClient) (*podresourcesapi.GetPodResourcesResponse, error) {
		return c.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: name, PodNamespace: ns})
	})
	var ids []string
	for _, c := range resp.GetPodResources().GetContainers() {
		for _, d := range c.GetDevices() {
			Expect(d.ResourceName).To(Equal(string(sampleResource)))
			ids = append(ids, d.DeviceIds...)
		}
	}
	return ids
}

var _ = Describe("Device plugins", Ordered, func() {
	// The upstream sample device plugin runs as a pod, its registration directory the agent's.
	var ns string
	BeforeAll(func() {
		ns = newNamespace()
		create(devicePluginPod(ns))
		Eventually(func(g Gomega) {
			c, a := sampleDevices(g)
			g.Expect([]int64{c, a}).To(Equal([]int64{2, 2}))
		}, 60*time.Second).Should(Succeed(), "the sample device plugin's two devices on the Node")
	})

	It("gives a container a device: its mount, and the pod resources API lists it", func() {
		create(devicePod(ns, "one", 1, "ls -d /tmp/Dev-*; sleep 3600"))
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, "one").Status.Phase).To(Equal(corev1.PodRunning))
		}, 60*time.Second).Should(Succeed())
		ids := podResources(ns, "one")
		Expect(ids).To(HaveLen(1))
		Expect(ids[0]).To(BeElementOf("Dev-1", "Dev-2"))
		p := getPod(Default, ns, "one")
		Eventually(func() string { return containerLog(p, "main", 0) }).Should(ContainSubstring("/tmp/" + ids[0]))
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, "one").Status.ContainerStatuses[0].AllocatedResourcesStatus).To(Equal([]corev1.ResourceStatus{{
				Name: sampleResource, Resources: []corev1.ResourceHealth{{ResourceID: corev1.ResourceID(ids[0]), Health: corev1.ResourceHealthStatusHealthy}},
			}}))
		}).Should(Succeed(), "the device's health in the container's status")
	})

	It("rejects a pod asking for more devices than are free, with the kubelet's reason", func() {
		create(devicePod(ns, "two", 2, "sleep 3600"))
		Eventually(func(g Gomega) {
			p := getPod(g, ns, "two")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("UnexpectedAdmissionError"))
			g.Expect(p.Status.Message).To(Equal("Pod was rejected: Allocate failed due to requested number of devices unavailable " +
				"for example.com/resource. Requested: 2, Available: 1, which is unexpected"))
		}, 30*time.Second).Should(Succeed())
	})

	It("keeps a running container's device across an agent restart, and gives the next pod the other one", func() {
		before := getPod(Default, ns, "one")
		held := podResources(ns, "one")
		bed("stop", "nodelet")
		b, err := os.ReadFile(filepath.Join(agentRoot(), "device-plugins", checkpoint.File))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(ContainSubstring(string(before.UID)), "the checkpoint holds the pod's devices")
		bed("start", "nodelet")
		// Until the plugin registers again (it watches for the registration socket), the agent has its
		// resource with no device, and a pod asking for one is rejected, as with the kubelet.
		Eventually(allocatableDevices, 60*time.Second).Should(Equal(2), "the plugin registered again")
		Eventually(func(g Gomega) {
			c, a := sampleDevices(g)
			g.Expect([]int64{c, a}).To(Equal([]int64{2, 2}))
		}, 30*time.Second).Should(Succeed())
		Expect(podResources(ns, "one")).To(Equal(held))
		create(devicePod(ns, "three", 1, "sleep 3600"))
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, "three").Status.Phase).To(Equal(corev1.PodRunning))
		}, 60*time.Second).Should(Succeed())
		Expect(podResources(ns, "three")).NotTo(ContainElement(held[0]))
		after := getPod(Default, ns, "one")
		Expect(after.Status.ContainerStatuses[0].ContainerID).To(Equal(before.Status.ContainerStatuses[0].ContainerID))
		Expect(after.Status.ContainerStatuses[0].RestartCount).To(BeZero())
	})

	It("takes a plugin's devices out of allocatable when the plugin goes away, keeping its capacity", func() {
		p := getPod(Default, ns, "sample-device-plugin")
		Expect(k8s.Delete(context.Background(), p)).To(Succeed())
		Eventually(func(g Gomega) {
			c, a := sampleDevices(g)
			g.Expect([]int64{c, a}).To(Equal([]int64{2, 0}))
		}, 60*time.Second).Should(Succeed())
		Expect(strings.Join(podResources(ns, "one"), ",")).NotTo(BeEmpty(), "a running pod keeps its device")
	})
})
