package podcgroups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/podrules"
)

// The host's page sizes in these tests: 2MB and 1GB.
var hostSizes = []int64{2 << 20, 1 << 30}

// A pod that requests 4Mi of 2Mi pages: its cgroup gets that limit for 2MB and 0 for 1GB, as the kubelet's
// ResourceConfigForPod and runc write them (every host size present, 0 where not requested); kubepods gets the
// node's pre-allocated pages at start, then, with the QoS cgroups, 1<<62 for each size (the kubelet's QoS
// manager updates kubepods as the Guaranteed tier). Both drivers, cgroup v1 and v2.
func TestHugetlbLimits(t *testing.T) {
	const pod = "/kubepods/burstable/pod12-ab"
	res := podrules.PodCgroup{CPUShares: 2, HugePageLimits: map[int64]int64{2 << 20: 4 << 20}}
	for _, tc := range []struct {
		name, driver   string
		unified        bool
		podDir, qosDir string // the pod and burstable cgroups in the hugetlb hierarchy
		kubepodsDir    string
	}{
		{"cgroupfs v1", podrules.CgroupDriverCgroupfs, false, "hugetlb/kubepods/burstable/pod12-ab", "hugetlb/kubepods/burstable", "hugetlb/kubepods"},
		{"cgroupfs v2", podrules.CgroupDriverCgroupfs, true, "kubepods/burstable/pod12-ab", "kubepods/burstable", "kubepods"},
		{"systemd v1", podrules.CgroupDriverSystemd, false, "hugetlb/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_ab.slice",
			"hugetlb/kubepods.slice/kubepods-burstable.slice", "hugetlb/kubepods.slice"},
		{"systemd v2", podrules.CgroupDriverSystemd, true, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_ab.slice",
			"kubepods.slice/kubepods-burstable.slice", "kubepods.slice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			mkdirs(t, filepath.Join(root, "cpu"), filepath.Join(root, "hugetlb"), filepath.Join(root, "systemd"))
			if err := os.WriteFile(filepath.Join(root, subtreeControl), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			m := &Manager{Root: root, Unified: tc.unified, Kubepods: "/kubepods", Resources: true, HugePageSizes: hostSizes, Driver: tc.driver}
			if tc.driver == podrules.CgroupDriverSystemd {
				m.Units = &fakeUnits{props: map[string]map[string]any{}}
			}
			fakeCgroupfs(m)
			if err := m.EnsureKubepods(Kubepods{MilliCPU: 1000, HugePages: map[int64]int64{2 << 20: 64 << 20}}); err != nil {
				t.Fatal(err)
			}
			suffix := ".limit_in_bytes"
			if tc.unified {
				suffix = ".max"
			}
			for file, want := range map[string]string{tc.kubepodsDir + "/hugetlb.2MB" + suffix: "67108864", tc.kubepodsDir + "/hugetlb.1GB" + suffix: "0"} {
				if got := read(t, filepath.Join(root, file)); got != want {
					t.Errorf("at start %s = %q, want %q", file, got, want)
				}
			}
			if err := m.UpdateQoS(0); err != nil {
				t.Fatal(err)
			}
			if err := m.Ensure(pod, res); err != nil {
				t.Fatal(err)
			}
			for file, want := range map[string]string{
				tc.podDir + "/hugetlb.2MB" + suffix:      "4194304",
				tc.podDir + "/hugetlb.1GB" + suffix:      "0",
				tc.qosDir + "/hugetlb.2MB" + suffix:      "4611686018427387904",
				tc.qosDir + "/hugetlb.1GB" + suffix:      "4611686018427387904",
				tc.kubepodsDir + "/hugetlb.2MB" + suffix: "4611686018427387904",
				tc.kubepodsDir + "/hugetlb.1GB" + suffix: "4611686018427387904",
			} {
				if got := read(t, filepath.Join(root, file)); got != want {
					t.Errorf("%s = %q, want %q", file, got, want)
				}
			}
			if _, err := os.Stat(filepath.Join(root, tc.podDir, "hugetlb.2MB.rsvd"+suffix)); err == nil {
				t.Error("a reservation limit was made where the kernel has none")
			}
			if tc.unified && !strings.Contains(read(t, filepath.Join(root, subtreeControl)), "+hugetlb") {
				t.Error("hugetlb not enabled below the root")
			}
		})
	}
}

// Where the kernel has reservation limits (hugetlb.<size>.rsvd.*), they get the same values, as runc sets them.
func TestHugetlbReservationLimits(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "hugetlb/kubepods/besteffort/poda")
	mkdirs(t, dir, filepath.Join(root, "cpu"))
	for _, f := range []string{"hugetlb.2MB.rsvd.limit_in_bytes", "hugetlb.1GB.rsvd.limit_in_bytes"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("9223372036854771712"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := &Manager{Root: root, Kubepods: "/kubepods", Resources: true, HugePageSizes: hostSizes}
	if err := m.Ensure("/kubepods/besteffort/poda", podrules.PodCgroup{CPUShares: 2}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"hugetlb.2MB.limit_in_bytes", "hugetlb.2MB.rsvd.limit_in_bytes", "hugetlb.1GB.rsvd.limit_in_bytes"} {
		if got := read(t, filepath.Join(dir, f)); got != "0" {
			t.Errorf("%s = %q, want 0", f, got)
		}
	}
}

// Without huge page sizes (no hugetlb controller, or no huge pages) nothing is written to a hugetlb hierarchy.
func TestNoHugetlbWithoutSizes(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, filepath.Join(root, "cpu"), filepath.Join(root, "hugetlb"))
	m := &Manager{Root: root, Kubepods: "/kubepods", Resources: true}
	if err := m.Ensure("/kubepods/besteffort/poda", podrules.PodCgroup{CPUShares: 2, HugePageLimits: map[int64]int64{2 << 20: 2 << 20}}); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "hugetlb")); len(entries) != 0 {
		t.Errorf("hugetlb cgroups made: %v", entries)
	}
}

func TestHugetlbAvailable(t *testing.T) {
	v1 := t.TempDir()
	if HugetlbAvailable(v1, false) {
		t.Error("v1 without a hugetlb hierarchy: available")
	}
	mkdirs(t, filepath.Join(v1, "hugetlb"))
	if err := os.WriteFile(filepath.Join(v1, "hugetlb/cgroup.procs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !HugetlbAvailable(v1, false) {
		t.Error("v1 with a hugetlb hierarchy: not available")
	}
	v2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("cpuset cpu io memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if HugetlbAvailable(v2, true) {
		t.Error("v2 without hugetlb in cgroup.controllers: available")
	}
	if err := os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("cpuset cpu io memory hugetlb pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !HugetlbAvailable(v2, true) {
		t.Error("v2 with hugetlb: not available")
	}
}

// The kubelet's swapControllerAvailable: memory.memsw.limit_in_bytes on v1, memory.swap.max in the process's
// own cgroup on v2.
func TestSwapController(t *testing.T) {
	root := t.TempDir()
	self := filepath.Join(t.TempDir(), "cgroup")
	if err := os.WriteFile(self, []byte("0::/system.slice/nodelet.service\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if SwapController(root, false, self) || SwapController(root, true, self) {
		t.Error("available without the control files")
	}
	mkdirs(t, filepath.Join(root, "memory"), filepath.Join(root, "system.slice/nodelet.service"))
	for _, f := range []string{"memory/memory.memsw.limit_in_bytes", "system.slice/nodelet.service/memory.swap.max"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !SwapController(root, false, self) {
		t.Error("v1 with memory.memsw.limit_in_bytes: not available")
	}
	if !SwapController(root, true, self) {
		t.Error("v2 with memory.swap.max in the own cgroup: not available")
	}
	if SwapController(root, true, filepath.Join(t.TempDir(), "missing")) {
		t.Error("v2 without /proc/self/cgroup: available")
	}
}
