package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// storageLimit gives a pod's containers an ephemeral-storage limit.
func storageLimit(limit string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for i := range p.Spec.Containers {
			p.Spec.Containers[i].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(limit)}
		}
	}
}

// dataDir mounts a disk emptyDir "data" at /data, with a sizeLimit unless "".
func dataDir(sizeLimit string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		ed := &corev1.EmptyDirVolumeSource{}
		if sizeLimit != "" {
			q := resource.MustParse(sizeLimit)
			ed.SizeLimit = &q
		}
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: ed}})
		for i := range p.Spec.Containers {
			p.Spec.Containers[i].VolumeMounts = append(p.Spec.Containers[i].VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data"})
		}
	}
}

// sidecarContainer adds a second regular container that sleeps.
func sidecarContainer(p *corev1.Pod) {
	c := p.Spec.Containers[0]
	c.Name, c.Command = "side", []string{"sleep", "3600"}
	p.Spec.Containers = append(p.Spec.Containers, c)
}

// writeMiB writes n MiB to path in the pod's container main (synced to disk) and returns when the write
// is done: the moment the usage is on the node's disk.
func writeMiB(p *corev1.Pod, path string, n int) time.Time {
	cmd := []string{"dd", "if=/dev/zero", "of=" + path, "bs=1M", fmt.Sprintf("count=%d", n), "conv=fsync"}
	Eventually(func(g Gomega) {
		var id string
		for _, c := range runtimeContainers(p.UID) {
			if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING && c.GetMetadata().GetName() == "main" {
				id = c.Id
			}
		}
		g.Expect(id).NotTo(BeEmpty(), "container main is not running")
		resp, err := cri.ExecSync(context.Background(), id, cmd, 30*time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.ExitCode).To(BeZero(), string(resp.Stderr))
	}, 60*time.Second).Should(Succeed())
	return time.Now()
}

// waitEvicted waits for the pod's Failed phase (polled every 100 ms) and returns the pod and when it was
// seen Failed.
func waitEvicted(ns, name string, limit time.Duration) (*corev1.Pod, time.Time) {
	var p *corev1.Pod
	var at time.Time
	Eventually(func(g Gomega) {
		p = getPod(g, ns, name)
		g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
		at = time.Now()
	}, limit, 100*time.Millisecond).Should(Succeed())
	return p, at
}

// expectLocalStorageEviction checks the kubelet's local storage eviction: Failed, reason Evicted, the
// message, no DisruptionTarget condition, and an Evicted warning event with the same message and no
// annotations.
func expectLocalStorageEviction(p *corev1.Pod, msg string) {
	Expect(p.Status.Reason).To(Equal("Evicted"))
	Expect(p.Status.Message).To(Equal(msg))
	for _, c := range p.Status.Conditions {
		Expect(c.Type).NotTo(Equal(corev1.DisruptionTarget), "the kubelet sets no DisruptionTarget for a local storage eviction")
	}
	Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(k8s.List(context.Background(), events, client.InNamespace(p.Namespace))).To(Succeed())
		var found *corev1.Event
		for i, e := range events.Items {
			if e.InvolvedObject.Name == p.Name && e.Reason == "Evicted" {
				found = &events.Items[i]
			}
		}
		g.Expect(found).NotTo(BeNil(), "no Evicted event for %s", p.Name)
		g.Expect(found.Type).To(Equal(corev1.EventTypeWarning))
		g.Expect(found.Message).To(Equal(msg))
		g.Expect(found.Annotations).To(BeEmpty())
	}, 30*time.Second).Should(Succeed())
}

var _ = Describe("Local ephemeral storage isolation on the real node", Ordered, func() {
	var ns string
	var under *corev1.Pod

	BeforeAll(func() {
		ns = newNamespace()
		// Within every limit: 20 MiB in its writable layer against 100Mi, 20 MiB in an emptyDir of 100Mi,
		// written before it is ready so that every measurement sees them.
		under = create(shPod(ns, "under", "dd if=/dev/zero of=/fill bs=1M count=20 conv=fsync && "+
			"dd if=/dev/zero of=/data/fill bs=1M count=20 conv=fsync && touch /ready; sleep 3600",
			storageLimit("100Mi"), dataDir("100Mi")))
	})

	running := func(p *corev1.Pod) {
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, p.Name).Status.Phase).To(Equal(corev1.PodRunning))
		}, 60*time.Second).Should(Succeed())
	}

	It("evicts a pod whose container writes past its ephemeral-storage limit, naming the container", func() {
		// main's 50Mi limit, side's 100Mi: the pod's total (150Mi) is not reached when main passes its own.
		writer := create(shPod(ns, "writer", "sleep 3600", sidecarContainer, func(p *corev1.Pod) {
			storageLimit("50Mi")(p)
			p.Spec.Containers[1].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("100Mi")}
		}))
		// One container: its limit is the pod's, and the pod's check comes first (the kubelet's order).
		single := create(shPod(ns, "single", "sleep 3600", storageLimit("50Mi")))
		running(writer)
		running(single)
		crossed := writeMiB(writer, "/fill", 64)
		crossedSingle := writeMiB(single, "/fill", 64)
		p, failed := waitEvicted(ns, "writer", 90*time.Second)
		report("local storage: container writable layer past its 50Mi limit, pod Failed %.1fs after the write", failed.Sub(crossed).Seconds())
		expectLocalStorageEviction(p, `Container main exceeded its local ephemeral storage limit "50Mi". `)
		p, failed = waitEvicted(ns, "single", 90*time.Second)
		report("local storage: one-container pod past its 50Mi limit, pod Failed %.1fs after the write", failed.Sub(crossedSingle).Seconds())
		expectLocalStorageEviction(p, "Pod ephemeral local storage usage exceeds the total limit of containers 50Mi. ")
		Expect(nodeMetric(`kubelet_evictions{eviction_signal="ephemeralcontainerfs.limit"}`)).To(Equal(1.0))
		Expect(nodeMetric(`kubelet_evictions{eviction_signal="ephemeralpodfs.limit"}`)).To(Equal(1.0))
	})

	It("evicts a pod past an emptyDir's sizeLimit, naming the volume, and a pod past its total limit", func() {
		// The kubelet measures volumes every one to two minutes: its evictions here take that long.
		filler := create(shPod(ns, "filler", "sleep 3600", dataDir("20Mi")))
		// 2 × 30Mi of containers' limits; its emptyDir has no sizeLimit but counts towards the pod's use.
		total := create(shPod(ns, "total", "sleep 3600", sidecarContainer, storageLimit("30Mi"), dataDir("")))
		running(filler)
		running(total)
		crossedDir := writeMiB(filler, "/data/fill", 32)
		crossedPod := writeMiB(total, "/data/fill", 80)
		p, failed := waitEvicted(ns, "filler", 240*time.Second)
		report("local storage: emptyDir past its 20Mi sizeLimit, pod Failed %.1fs after the write", failed.Sub(crossedDir).Seconds())
		expectLocalStorageEviction(p, `Usage of EmptyDir volume "data" exceeds the limit "20Mi". `)
		p, failed = waitEvicted(ns, "total", 240*time.Second)
		report("local storage: pod past its 60Mi total limit (emptyDir use), pod Failed %.1fs after the write", failed.Sub(crossedPod).Seconds())
		expectLocalStorageEviction(p, "Pod ephemeral local storage usage exceeds the total limit of containers 60Mi. ")
		Expect(nodeMetric(`kubelet_evictions{eviction_signal="emptydirfs.limit"}`)).To(Equal(1.0))
		Expect(nodeMetric(`kubelet_evictions{eviction_signal="ephemeralpodfs.limit"}`)).To(Equal(2.0))
	})

	It("keeps the pod within its limits", func() {
		execIn(under, "test", "-f", "/ready")
		p := getPod(Default, ns, "under")
		Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
	})
})
