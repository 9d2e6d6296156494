package integration_test

import (
	"context"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
)

// Statuses written by someone else than the agent: a user who may write pods/status in the pod's namespace
// (here the admin) forges a container ID or a terminal phase.
var _ = Describe("Pod reconciler: a status written by someone else", func() {
	var (
		ns       string
		nodeName string
		rt       *fake.Runtime
		cri      *runtime.Client
		bed      *podBed
		ctx      = context.Background()
	)

	getPod := func(g Gomega, name string) *corev1.Pod { return apiPod(ctx, g, ns, name) }
	running := func(g Gomega, podName string) *runtimeapi.Container {
		for _, c := range rt.Containers() {
			if c.Labels[runtime.LabelPodName] == podName && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return c
			}
		}
		g.Expect("no running container in " + podName).To(BeEmpty())
		return nil
	}
	forge := func(name, patch string) {
		Expect(admin.Status().Patch(ctx, busyboxPod(ns, name, nodeName),
			client.RawPatch(types.StrategicMergePatchType, []byte(patch)))).To(Succeed())
	}
	withPreStop := func(p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{
			PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "drain"}}}}
	}
	// stoppedGracefully: the preStop hook ran before the container was stopped, and the container got
	// SIGTERM with time to stop (exit 143), not the SIGKILL of a sandbox teardown (137).
	stoppedGracefully := func(id string) {
		Eventually(func(g Gomega) {
			st, err := cri.ContainerStatus(ctx, id, false)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.GetStatus().GetState()).To(Equal(runtimeapi.ContainerState_CONTAINER_EXITED))
			g.Expect(st.GetStatus().GetExitCode()).To(BeEquivalentTo(143), "stopped with a grace period, not killed")
		}).WithTimeout(10 * time.Second).Should(Succeed())
		calls := rt.Calls()
		hook, stop := slices.Index(calls, "ExecSync"), slices.Index(calls, "StopContainer")
		Expect(hook).To(BeNumerically(">=", 0), "the preStop hook ran: %v", calls)
		Expect(stop).To(BeNumerically(">", hook), "the container was stopped after its preStop hook: %v", calls)
	}

	BeforeEach(func() {
		nodeName = "owner-" + utilrand.String(6)
		ns = "ns-" + utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		rt, cri = startFakeRuntime()
		rt.AddImage("docker.io/library/busybox:latest", 1<<20)
		bed = newPodBed(nodeName, rt, cri)
	})

	It("writes its own status back over a forged container ID", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "web", nodeName))).To(Succeed())
		var id string
		Eventually(func(g Gomega) {
			id = running(g, "web").Id
			p := getPod(g, "web")
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].ContainerID).To(Equal("fake-runtime://" + id))
		}).Should(Succeed())
		forge("web", `{"status":{"containerStatuses":[{"name":"app",`+
			`"containerID":"containerd://0123456789abcdef","image":"busybox","imageID":"","ready":true,"restartCount":0,`+
			`"state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}}]}}`)
		Eventually(func(g Gomega) {
			bed.step(housekeepingPeriod) // overwritten statuses are looked for every housekeeping period
			p := getPod(g, "web")
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].ContainerID).To(Equal("fake-runtime://" + id))
		}).WithTimeout(15*time.Second).Should(Succeed(), "the agent writes back the status it computes")
		Expect(running(Default, "web").Id).To(Equal(id), "the container kept running")
	})

	It("runs the preStop hook and the grace period of a pod whose terminal phase someone else wrote", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "web", nodeName, withPreStop))).To(Succeed())
		var id string
		Eventually(func(g Gomega) {
			id = running(g, "web").Id
			g.Expect(getPod(g, "web").Status.Phase).To(Equal(corev1.PodRunning))
		}).Should(Succeed())
		rt.ResetCalls()
		forge("web", `{"status":{"phase":"Failed","reason":"Forged"}}`)
		stoppedGracefully(id)
	})

	It("runs the preStop hook and the grace period when it starts and finds a terminal phase written meanwhile", func() {
		Expect(admin.Create(ctx, busyboxPod(ns, "web", nodeName, withPreStop))).To(Succeed())
		var id string
		Eventually(func(g Gomega) {
			id = running(g, "web").Id
			g.Expect(getPod(g, "web").Status.Phase).To(Equal(corev1.PodRunning))
		}).Should(Succeed())
		bed.stop()
		forge("web", `{"status":{"phase":"Failed","reason":"Forged"}}`)
		rt.ResetCalls()
		bed.start()
		stoppedGracefully(id)
	})
})
