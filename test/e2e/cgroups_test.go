package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/podrules"
)

// cgroupDriver is the bed's cgroup driver, as hack/bed.sh takes it (CGROUP_DRIVER, cgroupfs by default).
func cgroupDriver() string {
	if d := os.Getenv("CGROUP_DRIVER"); d != "" {
		return d
	}
	return podrules.CgroupDriverCgroupfs
}

// qosCgroup is the name of kubepods (qos "") or of one of its QoS cgroups.
func qosCgroup(qos string) podrules.CgroupName {
	name := podrules.CgroupName{podrules.KubepodsCgroup}
	if qos == "" {
		return name
	}
	return name.Child(qos)
}

// readCgroup reads a control file of the cgroup name in a cgroup v1 hierarchy (the bed's machine is on cgroup
// v1), laid out by the bed's cgroup driver (kubepods/burstable/pod<uid> or
// kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice).
func readCgroup(g Gomega, hierarchy string, name podrules.CgroupName, file string) string {
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", hierarchy, filepath.FromSlash(name.Path(cgroupDriver())), file))
	g.Expect(err).NotTo(HaveOccurred())
	return strings.TrimSpace(string(b))
}

// readPodCgroup reads a control file of the pod's cgroup: kubepods/pod<uid> for Guaranteed pods,
// kubepods/<qos>/pod<uid> else.
func readPodCgroup(g Gomega, hierarchy, qos string, p *corev1.Pod, file string) string {
	return readCgroup(g, hierarchy, qosCgroup(qos).Child(podrules.PodCgroupChild(string(p.UID))), file)
}

func withResources(req, lim corev1.ResourceList) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: req, Limits: lim}
	}
}

func cpuMem(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

var _ = Describe("Pod cgroups on the real node", func() {
	It("carry the kubelet's cpu shares, CFS quota and memory limit for each QoS class", func() {
		ns := newNamespace()
		best := create(shPod(ns, "besteffort", "sleep 3600"))
		burst := create(shPod(ns, "burstable", "sleep 3600", withResources(cpuMem("100m", "100Mi"), cpuMem("200m", "200Mi"))))
		guar := create(shPod(ns, "guaranteed", "sleep 3600", withResources(cpuMem("100m", "100Mi"), cpuMem("100m", "100Mi"))))
		for _, tc := range []struct {
			pod                 *corev1.Pod
			qos, shares, quota  string
			memory              string
			period, memoryUnset bool
		}{
			// The kubelet's ResourceConfigForPod values: shares from requests (102 for 100m), the quota from
			// the cpu limit over 100 ms, the memory limit; BestEffort only the minimum shares.
			{pod: best, qos: "besteffort", shares: "2", quota: "-1", memoryUnset: true},
			{pod: burst, qos: "burstable", shares: "102", quota: "20000", memory: fmt.Sprint(200 << 20), period: true},
			{pod: guar, qos: "", shares: "102", quota: "10000", memory: fmt.Sprint(100 << 20), period: true},
		} {
			Eventually(func(g Gomega) {
				g.Expect(readPodCgroup(g, "cpu", tc.qos, tc.pod, "cpu.shares")).To(Equal(tc.shares))
				g.Expect(readPodCgroup(g, "cpu", tc.qos, tc.pod, "cpu.cfs_quota_us")).To(Equal(tc.quota))
				if tc.period {
					g.Expect(readPodCgroup(g, "cpu", tc.qos, tc.pod, "cpu.cfs_period_us")).To(Equal("100000"))
				}
				limit := readPodCgroup(g, "memory", tc.qos, tc.pod, "memory.limit_in_bytes")
				if tc.memoryUnset {
					g.Expect(len(limit)).To(BeNumerically(">=", 18), "an unlimited memory cgroup, got %s", limit)
				} else {
					g.Expect(limit).To(Equal(tc.memory))
				}
			}, 60*time.Second, 500*time.Millisecond).Should(Succeed(), "pod %s", tc.pod.Name)
		}
		// The QoS cgroups: besteffort the minimum shares; burstable at least the shares of this burstable
		// pod's 100m (other specs' burstable pods may add to it).
		Eventually(func(g Gomega) {
			g.Expect(readCgroup(g, "cpu", qosCgroup("besteffort"), "cpu.shares")).To(Equal("2"))
			g.Expect(strconv.Atoi(readCgroup(g, "cpu", qosCgroup("burstable"), "cpu.shares"))).To(BeNumerically(">=", 102))
		}, 30*time.Second, 500*time.Millisecond).Should(Succeed())
	})
})

// kubepodsValue reads a control file of the kubepods cgroup in a v1 hierarchy.
func kubepodsValue(g Gomega, hierarchy, file string) string {
	return readCgroup(g, hierarchy, qosCgroup(""), file)
}

const reservedDropIn = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
kubeReserved:
  cpu: 500m
  memory: 1Gi
systemReserved:
  pid: "1000"
`

var _ = Describe("The kubepods cgroup on the real node", Ordered, func() {
	It("is limited to node allocatable with enforceNodeAllocatable [pods], and to capacity without reservations", func() {
		info, err := machine.Reader{}.Info()
		Expect(err).NotTo(HaveOccurred())
		sig, err := machine.Reader{}.Signals()
		Expect(err).NotTo(HaveOccurred())
		check := func(milliCPU, memory, pids int64) {
			Eventually(func(g Gomega) {
				g.Expect(kubepodsValue(g, "cpu", "cpu.shares")).To(Equal(strconv.FormatInt(podrules.MilliCPUToShares(milliCPU), 10)))
				g.Expect(kubepodsValue(g, "memory", "memory.limit_in_bytes")).To(Equal(strconv.FormatInt(memory, 10)))
				g.Expect(kubepodsValue(g, "pids", "pids.max")).To(Equal(strconv.FormatInt(pids, 10)))
			}, 30*time.Second, 500*time.Millisecond).Should(Succeed())
		}
		By("the bed's configuration reserves nothing: the node's capacity")
		check(info.NumCPU*1000, info.MemoryBytes, sig.PIDMax)

		By("kubeReserved cpu 500m and memory 1Gi, systemReserved pid 1000: capacity less the reservations")
		dir := filepath.Join(bedDir, "reserved.conf.d")
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "10-reserved.conf"), []byte(reservedDropIn), 0o644)).To(Succeed())
		restartNodelet("NODELET_EXTRA_ARGS=--config-dir " + dir)
		DeferCleanup(func() {
			restartNodelet()
			check(info.NumCPU*1000, info.MemoryBytes, sig.PIDMax)
		})
		check(info.NumCPU*1000-500, info.MemoryBytes-1<<30, sig.PIDMax-1000)
		Eventually(func(g Gomega) {
			alloc := getNode(g).Status.Allocatable
			g.Expect(alloc.Cpu().MilliValue()).To(Equal(info.NumCPU*1000 - 500))
		}, 30*time.Second).Should(Succeed())
	})
})
