package integration_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("In-place pod resize", func() {
	ctx := context.Background()

	// resources is a container's requests and limits of cpu and memory.
	resources := func(cpuReq, memReq, cpuLim, memLim string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuReq), corev1.ResourceMemory: resource.MustParse(memReq)},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLim), corev1.ResourceMemory: resource.MustParse(memLim)},
		}
	}
	// resize patches the pod's resize subresource with the app container's new resources.
	resize := func(ns, name string, r corev1.ResourceRequirements) {
		patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":%q,"memory":%q},"limits":{"cpu":%q,"memory":%q}}}]}}`,
			r.Requests.Cpu().String(), r.Requests.Memory().String(), r.Limits.Cpu().String(), r.Limits.Memory().String())
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		Expect(admin.SubResource("resize").Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, []byte(patch)))).To(Succeed())
	}
	// running waits for the pod to run and returns it.
	running := func(ns, name string) *corev1.Pod {
		var p *corev1.Pod
		Eventually(func(g Gomega) {
			p = apiPod(ctx, g, ns, name)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].State.Running).NotTo(BeNil())
		}).Should(Succeed())
		return p
	}
	// applied waits until the pod's status shows r as the app container's resources and allocation, the
	// resize done (no resize condition, the generation observed), and returns the pod.
	applied := func(g Gomega, ns, name string, r corev1.ResourceRequirements) *corev1.Pod {
		p := apiPod(ctx, g, ns, name)
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
		g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
		st := p.Status.ContainerStatuses[0]
		g.Expect(st.AllocatedResources).To(Equal(r.Requests))
		g.Expect(st.Resources).NotTo(BeNil())
		g.Expect(st.Resources.Requests).To(Equal(r.Requests))
		g.Expect(st.Resources.Limits).To(Equal(r.Limits))
		for _, c := range p.Status.Conditions {
			g.Expect(c.Type).NotTo(BeElementOf(corev1.PodResizePending, corev1.PodResizeInProgress), "condition %+v", c)
		}
		return p
	}
	// linuxResources are what the runtime says the pod's running app container runs with.
	linuxResources := func(g Gomega, bed *podBed, podName string) *runtimeapi.LinuxContainerResources {
		for _, c := range podContainers(bed.rt, podName) {
			if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue
			}
			st, err := bed.cri.ReadContainer(ctx, c.Id, c.PodSandboxId)
			g.Expect(err).NotTo(HaveOccurred())
			return st.Resources
		}
		g.Expect("no running container").To(BeEmpty())
		return nil
	}
	// newResizeBed runs an agent on a node of its own, with a namespace for its pods.
	newResizeBed := func() (nodeName, ns string, bed *podBed) {
		nodeName, ns = "resize-"+utilrand.String(6), "ns-"+utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		rt, cri := startFakeRuntime()
		rt.AddImage("docker.io/library/busybox:latest", 1<<20)
		return nodeName, ns, newPodBed(nodeName, rt, cri)
	}
	events := func(bed *podBed) string {
		var out []string
		for {
			select {
			case e := <-bed.events.Events:
				out = append(out, e)
			default:
				return strings.Join(out, "\n")
			}
		}
	}

	It("applies a cpu and memory resize to the running container in place, and reports it", func() {
		nodeName, ns, bed := newResizeBed()
		rt := bed.rt

		before, after := resources("100m", "64Mi", "200m", "128Mi"), resources("150m", "96Mi", "300m", "192Mi")
		Expect(admin.Create(ctx, busyboxPod(ns, "web", nodeName, func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = before
		}))).To(Succeed())
		running(ns, "web")
		Eventually(func(g Gomega) { applied(g, ns, "web", before) }).Should(Succeed())

		resize(ns, "web", after)
		Eventually(func(g Gomega) {
			p := applied(g, ns, "web", after)
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
			lr := linuxResources(g, bed, "web")
			g.Expect(lr.CpuShares).To(Equal(int64(153)))  // 150m
			g.Expect(lr.CpuQuota).To(Equal(int64(30000))) // 300m over 100ms
			g.Expect(lr.MemoryLimitInBytes).To(Equal(int64(192 << 20)))
		}).Should(Succeed())
		Expect(podContainers(rt, "web")).To(HaveLen(1), "resized in place, not restarted")
		Expect(rt.Calls()).To(ContainElement("UpdateContainerResources"))
		Expect(metricSeries(bed, "kubelet_container_requested_resizes_total")).To(Equal(map[string]float64{
			"operation=increase,requirement=requests,resource=cpu": 1, "operation=increase,requirement=limits,resource=cpu": 1,
			"operation=increase,requirement=requests,resource=memory": 1, "operation=increase,requirement=limits,resource=memory": 1,
		}))
		Expect(metricSeries(bed, "kubelet_pod_resize_duration_milliseconds")["success=true"]).To(BeNumerically(">=", 1))
		Expect(metricSeries(bed, "kubelet_pod_in_progress_resizes")).To(Equal(map[string]float64{"": 0}))
		ev := events(bed)
		Expect(ev).To(ContainSubstring(`Normal ResizeStarted Pod resize started: {"containers":[{"name":"app","resources":{"limits":{"cpu":"300m","memory":"192Mi"},"requests":{"cpu":"150m","memory":"96Mi"}}}],"generation":2}`))
		Expect(ev).To(ContainSubstring(`Normal ResizeCompleted Pod resize completed:`))
	})

	It("restarts a container whose resize policy asks for it, with the new resources", func() {
		nodeName, ns, bed := newResizeBed()

		before, after := resources("100m", "64Mi", "200m", "128Mi"), resources("100m", "96Mi", "200m", "192Mi")
		Expect(admin.Create(ctx, busyboxPod(ns, "db", nodeName, func(p *corev1.Pod) {
			p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(0))
			p.Spec.Containers[0].Resources = before
			p.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{
				{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
				{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
			}
		}))).To(Succeed())
		running(ns, "db")

		resize(ns, "db", after)
		Eventually(func(g Gomega) {
			p := applied(g, ns, "db", after)
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(Equal(int32(1)))
			g.Expect(p.Status.ContainerStatuses[0].State.Running).NotTo(BeNil())
			g.Expect(linuxResources(g, bed, "db").MemoryLimitInBytes).To(Equal(int64(192 << 20)))
		}).Should(Succeed())
		Expect(events(bed)).To(ContainSubstring("Normal Killing Container app resize requires restart"))
	})

	It("defers a resize the node has no room for, and applies it once room is made", func() {
		nodeName, ns, bed := newResizeBed()

		// 2 CPUs: the hog takes 1500m, the app 200m; 700m more for the app does not fit beside the hog.
		Expect(admin.Create(ctx, busyboxPod(ns, "hog", nodeName, func(p *corev1.Pod) {
			p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(0))
			p.Spec.Containers[0].Resources = resources("1500m", "64Mi", "1500m", "64Mi")
		}))).To(Succeed())
		before, after := resources("200m", "64Mi", "200m", "64Mi"), resources("900m", "64Mi", "900m", "64Mi")
		Expect(admin.Create(ctx, busyboxPod(ns, "app", nodeName, func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = before
		}))).To(Succeed())
		running(ns, "hog")
		running(ns, "app")

		resize(ns, "app", after)
		Eventually(func(g Gomega) {
			p := apiPod(ctx, g, ns, "app")
			var pending *corev1.PodCondition
			for i := range p.Status.Conditions {
				if p.Status.Conditions[i].Type == corev1.PodResizePending {
					pending = &p.Status.Conditions[i]
				}
			}
			g.Expect(pending).NotTo(BeNil())
			g.Expect(pending.Reason).To(Equal("Deferred"))
			g.Expect(pending.Message).To(HavePrefix("Node didn't have enough resource: cpu, requested: 900, used: 1500, capacity: "))
			g.Expect(pending.ObservedGeneration).To(Equal(p.Generation))
			g.Expect(p.Status.ContainerStatuses[0].AllocatedResources).To(Equal(before.Requests))
		}).Should(Succeed())
		Expect(events(bed)).To(ContainSubstring("Warning ResizeDeferred Pod resize OutOfcpu: "))

		Expect(admin.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hog"}})).To(Succeed())
		Eventually(func(g Gomega) {
			bed.step(housekeepingPeriod) // deferred resizes are retried by housekeeping
			applied(g, ns, "app", after)
			g.Expect(linuxResources(g, bed, "app").CpuQuota).To(Equal(int64(90000)))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("resizes pod-level resources in place: the containers that take the pod's limits and the pod's status", func() {
		nodeName, ns, bed := newResizeBed()

		before, after := resources("200m", "64Mi", "200m", "64Mi"), resources("300m", "96Mi", "300m", "96Mi")
		Expect(admin.Create(ctx, busyboxPod(ns, "plr", nodeName, func(p *corev1.Pod) {
			p.Spec.Resources = before.DeepCopy()
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		}))).To(Succeed())
		running(ns, "plr")
		Eventually(func(g Gomega) {
			g.Expect(linuxResources(g, bed, "plr").MemoryLimitInBytes).To(Equal(int64(64 << 20)))
		}).Should(Succeed())

		patch := fmt.Sprintf(`{"spec":{"resources":{"requests":{"cpu":%q,"memory":%q},"limits":{"cpu":%q,"memory":%q}}}}`,
			"300m", "96Mi", "300m", "96Mi")
		Expect(admin.SubResource("resize").Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plr"}},
			client.RawPatch(types.StrategicMergePatchType, []byte(patch)))).To(Succeed())
		Eventually(func(g Gomega) {
			p := apiPod(ctx, g, ns, "plr")
			g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
			for _, c := range p.Status.Conditions {
				g.Expect(c.Type).NotTo(BeElementOf(corev1.PodResizePending, corev1.PodResizeInProgress), "condition %+v", c)
			}
			g.Expect(p.Status.AllocatedResources).To(Equal(after.Requests))
			g.Expect(p.Status.Resources).NotTo(BeNil())
			g.Expect(p.Status.Resources.Limits.Memory().Value()).To(Equal(int64(96 << 20)))
			g.Expect(p.Status.Resources.Limits.Cpu().MilliValue()).To(Equal(int64(300)))
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
			// As the kubelet: a container's status resources are its own, whatever limit it takes from the pod.
			g.Expect(p.Status.ContainerStatuses[0].Resources.Limits).To(BeEmpty())
			lr := linuxResources(g, bed, "plr")
			g.Expect(lr.MemoryLimitInBytes).To(Equal(int64(96 << 20)))
			g.Expect(lr.CpuQuota).To(Equal(int64(30000)))
		}).Should(Succeed())
		Expect(podContainers(bed.rt, "plr")).To(HaveLen(1), "resized in place, not restarted")
		Expect(events(bed)).To(ContainSubstring("Normal ResizeCompleted Pod resize completed:"))
	})
})
