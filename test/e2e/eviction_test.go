package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/machine"
)

// memoryAvailable is the node's memory.available as the kubelet measures it: capacity minus the root memory
// cgroup's working set.
func memoryAvailable() int64 {
	s, err := machine.Reader{}.Signals()
	Expect(err).NotTo(HaveOccurred())
	return s.MemoryAvailableBytes
}

// hogMiB is what the memory hog writes to its memory-backed emptyDir; the threshold is set marginMiB below
// the memory available before it starts.
const (
	hogMiB    = 1000
	marginMiB = 400
	// prefillMiB of the hog's are written before the threshold is set.
	prefillMiB = 200
)

// claimsFileSource annotates an API pod as if it came from a manifest file. Whoever creates a pod may write
// that annotation; the node agent decides a pod's source itself, so such a pod gets its status written, is
// evicted and is rejected under pressure like any other (a static pod would be critical: never evicted).
func claimsFileSource(p *corev1.Pod) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations["kubernetes.io/config.source"] = "file"
}

var _ = Describe("Node-pressure eviction on the real node", Ordered, func() {
	It("evicts a memory hog past an evictionHard threshold (one that claims config.source file too), keeps the pod within its request, and rejects BestEffort pods under MemoryPressure", func() {
		ctx := context.Background()
		By("waiting until the pods of the specs before are gone from the node (they would be evicted too)")
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods)).To(Succeed())
			var others []string
			for _, p := range pods.Items {
				if p.Spec.NodeName == nodeName && strings.HasPrefix(p.Namespace, "e2e-") {
					others = append(others, p.Namespace+"/"+p.Name)
				}
			}
			g.Expect(others).To(BeEmpty())
		}, 3*time.Minute, time.Second).Should(Succeed())
		ns := newNamespace()
		mem := func(req string) func(*corev1.Pod) {
			return withResources(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(req)}, nil)
		}
		keeper := create(shPod(ns, "keeper", "sleep 3600", mem("64Mi")))
		// The hog holds prefillMiB before the threshold is set, so that it is the pod using more than its request
		// whatever else moves memory.available on the bed (a busy CI run once crossed the threshold before the
		// hog had written anything, and the message rightly named no container).
		hog := create(shPod(ns, "hog", fmt.Sprintf("dd if=/dev/zero of=/hog/pre bs=1M count=%d && touch /hog/ready; "+
			"while [ ! -f /hog/go ]; do sleep 0.1; done; dd if=/dev/zero of=/hog/fill bs=1M count=%d; sleep 3600", prefillMiB, hogMiB-prefillMiB),
			mem("10Mi"), claimsFileSource, func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "hog", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}
				p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "hog", MountPath: "/hog"}}
			}))
		for _, p := range []*corev1.Pod{keeper, hog} {
			Eventually(func(g Gomega) {
				g.Expect(getPod(g, ns, p.Name).Status.Phase).To(Equal(corev1.PodRunning))
			}, 60*time.Second).Should(Succeed())
		}

		execIn(hog, "test", "-f", "/hog/ready")

		By("restarting nodelet with memory.available just below what the node has free")
		thresholdMiB := memoryAvailable()>>20 - marginMiB
		dropIn := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionHard:
  memory.available: %dMi
evictionPressureTransitionPeriod: 60s
kernelMemcgNotification: true
`, thresholdMiB)
		dir := filepath.Join(bedDir, "eviction.conf.d")
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "10-eviction.conf"), []byte(dropIn), 0o644)).To(Succeed())
		restartNodelet("NODELET_EXTRA_ARGS=--config-dir " + dir)
		DeferCleanup(func() {
			restartNodelet()
			Eventually(func(g Gomega) {
				g.Expect(nodeCondition(getNode(g), corev1.NodeMemoryPressure).Status).To(Equal(corev1.ConditionFalse))
			}, 60*time.Second).Should(Succeed())
		})
		avail := memoryAvailable() >> 20
		Expect(avail).To(BeNumerically(">", thresholdMiB+100),
			"memory.available moved by more than %d MiB during the restart; the bed is too busy for this spec", marginMiB-100)

		By("starting the hog and timing the eviction from the moment memory.available crosses the threshold")
		var crossedAt atomic.Int64
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			defer GinkgoRecover()
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				s, err := machine.Reader{}.Signals()
				if err == nil && s.MemoryAvailableBytes>>20 < thresholdMiB {
					crossedAt.CompareAndSwap(0, time.Now().UnixNano())
				}
			}
		}()
		execIn(hog, "touch", "/hog/go")
		var failedAt time.Time
		var evicted *corev1.Pod
		Eventually(func(g Gomega) {
			evicted = getPod(g, ns, "hog")
			g.Expect(evicted.Status.Phase).To(Equal(corev1.PodFailed))
			failedAt = time.Now()
		}, 90*time.Second, 20*time.Millisecond).Should(Succeed())
		Expect(crossedAt.Load()).NotTo(BeZero(), "memory.available never crossed the threshold")
		report("eviction: memory.available crossed %d Mi, hog pod Failed %.2fs later (kernelMemcgNotification on)",
			thresholdMiB, failedAt.Sub(time.Unix(0, crossedAt.Load())).Seconds())

		By("failing the hog with the kubelet's reason, message and DisruptionTarget condition")
		Expect(evicted.Status.Reason).To(Equal("Evicted"))
		Expect(evicted.Status.Message).To(HavePrefix(fmt.Sprintf("The node was low on resource: memory. Threshold quantity: %dMi, available: ", thresholdMiB)))
		Expect(evicted.Status.Message).To(ContainSubstring("Container main was using "))
		Expect(evicted.Status.Message).To(HaveSuffix(", request is 10Mi, has larger consumption of memory. "))
		var disruption *corev1.PodCondition
		for i := range evicted.Status.Conditions {
			if evicted.Status.Conditions[i].Type == corev1.DisruptionTarget {
				disruption = &evicted.Status.Conditions[i]
			}
		}
		Expect(disruption).NotTo(BeNil(), "no DisruptionTarget condition: %+v", evicted.Status.Conditions)
		Expect(disruption.Status).To(Equal(corev1.ConditionTrue))
		Expect(disruption.Reason).To(Equal("TerminationByKubelet"))
		Eventually(func(g Gomega) {
			events := &corev1.EventList{}
			g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
			var found bool
			for _, e := range events.Items {
				found = found || e.InvolvedObject.Name == "hog" && e.Reason == "Evicted" && e.Type == corev1.EventTypeWarning &&
					e.Message == evicted.Status.Message
			}
			g.Expect(found).To(BeTrue(), "no Evicted event for the hog")
		}, 30*time.Second).Should(Succeed())

		By("reporting MemoryPressure and rejecting a BestEffort pod at admission")
		// The Node's status is written every nodeStatusUpdateFrequency (10 s); the transition period (60 s)
		// holds the condition meanwhile.
		Eventually(func(g Gomega) {
			g.Expect(nodeCondition(getNode(g), corev1.NodeMemoryPressure).Status).To(Equal(corev1.ConditionTrue))
		}, 20*time.Second).Should(Succeed())
		create(shPod(ns, "besteffort", "sleep 3600"))
		create(shPod(ns, "besteffort-file", "sleep 3600", claimsFileSource))
		for _, name := range []string{"besteffort", "besteffort-file"} {
			Eventually(func(g Gomega) {
				p := getPod(g, ns, name)
				g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
				g.Expect(p.Status.Reason).To(Equal("Evicted"))
				g.Expect(p.Status.Message).To(Equal("Pod was rejected: The node had condition: [MemoryPressure]. "))
			}, 30*time.Second).Should(Succeed())
		}

		By("keeping the pod that uses less than it requests")
		k := getPod(Default, ns, "keeper")
		Expect(k.Status.Phase).To(Equal(corev1.PodRunning))
		Expect(k.Status.ContainerStatuses[0].RestartCount).To(BeZero())
		Expect(nodeMetric(`kubelet_evictions{eviction_signal="memory.available"}`)).To(Equal(1.0))
	})
})
