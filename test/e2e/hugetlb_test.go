package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/podcgroups"
	"github.com/nodelet/nodelet/podrules"
)

// runtimeSpecHugepages are the hugetlb limits of a container's OCI spec, as containerd reports it (verbose
// ContainerStatus: info.runtimeSpec), by page size name.
func runtimeSpecHugepages(g Gomega, id string) map[string]uint64 {
	st, err := cri.ContainerStatus(context.Background(), id, true)
	g.Expect(err).NotTo(HaveOccurred())
	var info struct {
		RuntimeSpec struct {
			Linux struct {
				Resources struct {
					HugepageLimits []struct {
						PageSize string `json:"pageSize"`
						Limit    uint64 `json:"limit"`
					} `json:"hugepageLimits"`
				} `json:"resources"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	g.Expect(json.Unmarshal([]byte(st.GetInfo()["info"]), &info)).To(Succeed())
	out := map[string]uint64{}
	for _, l := range info.RuntimeSpec.Linux.Resources.HugepageLimits {
		out[l.PageSize] = l.Limit
	}
	return out
}

// containerCgroupDir is the container's cgroup in the hugetlb hierarchy, below its pod's: <id> with the
// cgroupfs driver, cri-containerd-<id>.scope with systemd.
func containerCgroupDir(g Gomega, pod podrules.CgroupName, id string) string {
	matches, err := filepath.Glob(filepath.Join("/sys/fs/cgroup/hugetlb", filepath.FromSlash(pod.Path(cgroupDriver())), "*"+id+"*"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(matches).To(HaveLen(1), "the container's cgroup under its pod's")
	return matches[0]
}

var _ = Describe("Huge page limits on the real node", func() {
	It("limit each host page size to 0 in a container and its pod that ask for none, as the kubelet's", func() {
		info, err := machine.Reader{}.Info()
		Expect(err).NotTo(HaveOccurred())
		sizes := make([]int64, 0, len(info.HugePages))
		for size := range info.HugePages {
			sizes = append(sizes, size)
		}
		slices.Sort(sizes)
		if len(sizes) == 0 {
			Skip("this host has no huge page sizes")
		}
		By("the node reports each size's pre-allocated pages as its capacity")
		Eventually(func(g Gomega) {
			capacity := getNode(g).Status.Capacity
			for _, size := range sizes {
				name := corev1.ResourceName(corev1.ResourceHugePagesPrefix + resource.NewQuantity(size, resource.BinarySI).String())
				q, ok := capacity[name]
				g.Expect(ok).To(BeTrue(), "capacity %s", name)
				g.Expect(q.Value()).To(Equal(info.HugePages[size]), "capacity %s", name)
			}
		}, 30*time.Second).Should(Succeed())

		ns := newNamespace()
		p := create(shPod(ns, "no-huge-pages", "sleep 3600"))
		var id string
		Eventually(func(g Gomega) {
			got := getPod(g, ns, p.Name)
			g.Expect(got.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(got.Status.ContainerStatuses[0].State.Running).NotTo(BeNil())
			p = got
			id = strings.TrimPrefix(got.Status.ContainerStatuses[0].ContainerID, "containerd://")
		}, 60*time.Second).Should(Succeed())

		By("the container's CRI config carries a limit of 0 for every host page size")
		Eventually(func(g Gomega) {
			limits := runtimeSpecHugepages(g, id)
			for _, size := range sizes {
				name, _ := podrules.HugePageSizeName(size)
				g.Expect(limits).To(HaveKeyWithValue(name, uint64(0)))
			}
		}, 10*time.Second).Should(Succeed())

		Expect(podcgroups.HugetlbAvailable("/sys/fs/cgroup", false)).To(BeTrue(),
			"the bed mounts the hugetlb hierarchy (hack/lib.sh mount_cgroup_controllers)")
		podName := qosCgroup("besteffort").Child(podrules.PodCgroupChild(string(p.UID)))
		By("each size's hugetlb limit: 0 in the pod cgroup and the container's, none in effect (1<<62) in kubepods and the QoS cgroups")
		Eventually(func(g Gomega) {
			for _, size := range sizes {
				name, _ := podrules.HugePageSizeName(size)
				file := "hugetlb." + name + ".limit_in_bytes"
				g.Expect(readCgroup(g, "hugetlb", podName, file)).To(Equal("0"), "pod %s", file)
				b, err := os.ReadFile(filepath.Join(containerCgroupDir(g, podName, id), file))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(strings.TrimSpace(string(b))).To(Equal("0"), "container %s", file)
				for _, q := range []string{"", "burstable", "besteffort"} {
					g.Expect(readCgroup(g, "hugetlb", qosCgroup(q), file)).To(Equal(strconv.FormatInt(1<<62, 10)), "QoS cgroup %q %s", q, file)
				}
			}
		}, 30*time.Second, 500*time.Millisecond).Should(Succeed())
	})
})
