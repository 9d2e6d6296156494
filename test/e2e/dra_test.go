package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	noderuntime "github.com/nodelet/nodelet/runtime"
)

// draDriver is the upstream DRA test driver's name: its kubelet plugin publishes four devices of it on the
// node and prepares a claim by writing a CDI spec whose device sets environment variables (claim_<claim>_<
// request>=true, and user_<key>=<value> for each opaque parameter of the claim's config).
const draDriver = "test-driver.cdi.k8s.io"

// cdiSpecDir is where containerd 2.x reads CDI specs by default (and the driver writes them).
const cdiSpecDir = "/var/run/cdi"

// startDRADriver runs the upstream DRA test driver's kubelet plugin on this node until the spec ends (or
// the returned stop is called).
func startDRADriver() (stop func()) {
	bin := os.Getenv("DRA_DRIVER_BIN")
	Expect(bin).NotTo(BeEmpty(), "DRA_DRIVER_BIN is not set: run the suite with `make e2e` (hack/e2e.sh)")
	logFile, err := os.Create(filepath.Join(bedDir, "dra-test-driver.log"))
	Expect(err).NotTo(HaveOccurred())
	// The plugin's socket directory, which a driver's DaemonSet mounts from the host (DirectoryOrCreate).
	Expect(os.MkdirAll(filepath.Join(agentRoot(), "plugins", draDriver), 0o750)).To(Succeed())
	cmd := exec.Command(bin, "--kubeconfig", os.Getenv("KUBECONFIG"), "-v=3", "kubelet-plugin", "--node-name", nodeName,
		"--plugin-registration-path", filepath.Join(agentRoot(), "plugins_registry"),
		"--datadir", filepath.Join(agentRoot(), "plugins"), "--cdi-dir", cdiSpecDir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	Expect(cmd.Start()).To(Succeed())
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = logFile.Close()
	}
	DeferCleanup(stop)
	return stop
}

// driverSlices are the ResourceSlices of the test driver on this node.
func driverSlices(g Gomega) []resourceapi.ResourceSlice {
	var list resourceapi.ResourceSliceList
	g.Expect(k8s.List(context.Background(), &list)).To(Succeed())
	var out []resourceapi.ResourceSlice
	for _, s := range list.Items {
		if s.Spec.Driver == draDriver && ptr.Deref(s.Spec.NodeName, "") == nodeName {
			out = append(out, s)
		}
	}
	return out
}

// execInContainer runs cmd in the named running container of the pod through the CRI and returns its
// standard output.
func execInContainer(p *corev1.Pod, container string, cmd ...string) string {
	var out string
	Eventually(func(g Gomega) {
		cs, err := cri.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{noderuntime.LabelPodUID: string(p.UID), noderuntime.LabelContainerName: container}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cs).To(HaveLen(1))
		resp, err := cri.ExecSync(context.Background(), cs[0].Id, cmd, 10*time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.ExitCode).To(BeZero(), string(resp.Stderr))
		out = string(resp.Stdout)
	}, 60*time.Second).Should(Succeed())
	return out
}

// claimPod runs two containers; "with" uses the pod's claim "dev", made from the template.
func claimPod(ns, name, template string) *corev1.Pod {
	return shPod(ns, name, "sleep 3600", func(p *corev1.Pod) {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "dev", ResourceClaimTemplateName: ptr.To(template)}}
		p.Spec.Containers[0].Name = "with"
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "dev"}}
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "without", Image: "busybox", Command: []string{"sleep", "3600"}})
	})
}

var _ = Describe("Dynamic resource allocation on the real node", func() {
	It("prepares a pod's claim with the driver's kubelet plugin before the sandbox, injects its CDI devices into the containers that use it, and releases it when the pod goes", func() {
		ctx := context.Background()
		ns := newNamespace()
		stop := startDRADriver()
		By("the driver's plugin registers and publishes its devices")
		Eventually(func(g Gomega) {
			g.Expect(driverSlices(g)).NotTo(BeEmpty())
		}, 60*time.Second).Should(Succeed())

		class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: ns},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
				CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + draDriver + `"`}}}}}
		Expect(k8s.Create(ctx, class)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(context.Background(), class) })
		tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one-device"},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class.Name}}},
				Config: []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
					Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: draDriver,
						Parameters: runtime.RawExtension{Raw: []byte(`{"color":"blue"}`)}}}}},
			}}}}
		Expect(k8s.Create(ctx, tmpl)).To(Succeed())

		By("a pod bound without the scheduler has no allocated claim: the kubelet's event, and the pod waits")
		unscheduled := create(claimPod(ns, "unscheduled", tmpl.Name))
		Eventually(func(g Gomega) {
			events := strings.Join(podEvents(g, ns, unscheduled.Name), "\n")
			g.Expect(events).To(ContainSubstring("FailedPrepareDynamicResources: Failed to prepare dynamic resources: prepare dynamic resources: "))
			p := getPod(g, ns, unscheduled.Name)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			for _, cs := range p.Status.ContainerStatuses {
				g.Expect(cs.State.Waiting).NotTo(BeNil())
				g.Expect(cs.State.Waiting.Reason).To(Equal("ContainerCreating"))
			}
		}, 60*time.Second).Should(Succeed())
		Expect(runtimeContainers(unscheduled.UID)).To(BeEmpty())

		By("a scheduled pod: its claim allocated and reserved, prepared, its device in the container that uses it")
		pod := claimPod(ns, "scheduled", tmpl.Name)
		pod.Spec.NodeName = "" // the scheduler allocates the claim and binds the pod
		create(pod)
		var claimName string
		Eventually(func(g Gomega) {
			p := getPod(g, ns, pod.Name)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.ResourceClaimStatuses).To(HaveLen(1))
			claimName = ptr.Deref(p.Status.ResourceClaimStatuses[0].ResourceClaimName, "")
			pod = p
		}, 2*time.Minute).Should(Succeed())
		claim := &resourceapi.ResourceClaim{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: claimName}, claim)).To(Succeed())
		state := func() string {
			b, err := os.ReadFile(filepath.Join(agentRoot(), "dra_manager_state"))
			Expect(err).NotTo(HaveOccurred())
			return string(b)
		}
		Expect(state()).To(ContainSubstring(string(claim.UID)), "the kubelet's checkpoint names the prepared claim")
		cdiFiles, err := filepath.Glob(filepath.Join(cdiSpecDir, draDriver+"-"+string(claim.UID)+"-*.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(cdiFiles).NotTo(BeEmpty(), "the driver wrote no CDI spec: NodePrepareResources was not called")
		if runtimeSupportsCDI() {
			env := execInContainer(pod, "with", "env")
			Expect(env).To(ContainSubstring("user_color=blue"))
			Expect(env).To(ContainSubstring("claim_" + strings.ReplaceAll(claimName, "-", "_") + "_gpu=true"))
			Expect(execInContainer(pod, "without", "env")).NotTo(ContainSubstring("user_color"))
		} else {
			report("containerd %s has no CDI: the claim is prepared, its devices are not injected", getNodeRuntime())
		}

		By("the pod deleted: the claim unprepared before the pod object goes, and forgotten")
		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		waitGone(ns, pod.Name, time.Minute)
		Expect(state()).NotTo(ContainSubstring(string(claim.UID)))
		cdiFiles, err = filepath.Glob(filepath.Join(cdiSpecDir, draDriver+"-"+string(claim.UID)+"-*.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(cdiFiles).To(BeEmpty(), "NodeUnprepareResources was not called")

		By("the driver gone: its ResourceSlices of this node are deleted")
		Expect(k8s.Delete(ctx, unscheduled)).To(Succeed())
		waitGone(ns, unscheduled.Name, time.Minute)
		stop()
		Eventually(func(g Gomega) {
			g.Expect(driverSlices(g)).To(BeEmpty())
		}, 90*time.Second).Should(Succeed())
	})
})

// getNodeRuntime is the node's container runtime version (containerd://1.6.20).
func getNodeRuntime() string {
	var v string
	Eventually(func(g Gomega) {
		v = getNode(g).Status.NodeInfo.ContainerRuntimeVersion
		g.Expect(v).NotTo(BeEmpty())
	}).Should(Succeed())
	return v
}

// runtimeSupportsCDI says whether the node's containerd injects CDI devices (2.x does by default; 1.6 has
// no CDI).
func runtimeSupportsCDI() bool {
	return !strings.HasPrefix(getNodeRuntime(), "containerd://1.")
}
