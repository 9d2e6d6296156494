package podcgroups

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
)

// fakeCgroupfs makes dir act like a cgroup filesystem: a new cgroup gets its control files, and a
// cgroup can be removed while it has no child cgroups (its control files go with it).
func fakeCgroupfs(m *Manager) {
	m.mkdir = func(dir string) error {
		if err := os.Mkdir(dir, dirMode); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, subtreeControl), nil, 0o644)
	}
	m.rmdir = func(dir string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir() {
				return errors.New("device or resource busy")
			}
		}
		return os.RemoveAll(dir)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEnsureV1SetsPidsMaxInThePidsHierarchy(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, filepath.Join(root, "pids"), filepath.Join(root, "memory"))
	m := &Manager{Root: root, Kubepods: "/kubepods", PidsLimit: 1024}
	fakeCgroupfs(m)
	if err := m.Ensure("/kubepods/burstable/pod1234", podrules.PodCgroup{CPUShares: 2}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(root, "pids/kubepods/burstable/pod1234/pids.max")); got != "1024" {
		t.Errorf("pids.max = %q, want 1024", got)
	}
	if _, err := os.Stat(filepath.Join(root, "memory/kubepods")); err == nil {
		t.Error("a pod cgroup was made in the memory hierarchy (the runtime makes those)")
	}
	if err := m.Ensure("/kubepods/burstable/pod1234", podrules.PodCgroup{CPUShares: 2}); err != nil {
		t.Errorf("Ensure is not idempotent: %v", err)
	}
}

func TestEnsureV2EnablesPidsDownToThePod(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, subtreeControl), []byte("cpu memory"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &Manager{Root: root, Unified: true, Kubepods: "/kubepods", PidsLimit: 50}
	fakeCgroupfs(m)
	if err := m.Ensure("/kubepods/besteffort/podabc", podrules.PodCgroup{CPUShares: 2}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"", "kubepods", "kubepods/besteffort"} {
		if got := read(t, filepath.Join(root, d, subtreeControl)); got != "+pids" {
			t.Errorf("%s/cgroup.subtree_control written %q, want +pids", d, got)
		}
	}
	if got := read(t, filepath.Join(root, "kubepods/besteffort/podabc/pids.max")); got != "50" {
		t.Errorf("pids.max = %q, want 50", got)
	}
	if got := read(t, filepath.Join(root, "kubepods/besteffort/podabc", subtreeControl)); got != "" {
		t.Errorf("the pod cgroup's own subtree_control was written: %q", got)
	}
}

func TestEnsureV2LeavesAnEnabledControllerAlone(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, subtreeControl), []byte("cpu pids memory"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &Manager{Root: root, Unified: true, Kubepods: "/kubepods", PidsLimit: 50}
	fakeCgroupfs(m)
	if err := m.Ensure("/kubepods/poda", podrules.PodCgroup{CPUShares: 2}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(root, subtreeControl)); got != "cpu pids memory" {
		t.Errorf("root subtree_control rewritten to %q", got)
	}
}

func TestEnsureWithoutALimitDoesNothing(t *testing.T) {
	for _, limit := range []int64{0, -1} {
		root := t.TempDir()
		m := &Manager{Root: root, Kubepods: "/kubepods", PidsLimit: limit}
		if err := m.Ensure("/kubepods/poda", podrules.PodCgroup{CPUShares: 2}); err != nil {
			t.Fatal(err)
		}
		if entries, _ := os.ReadDir(root); len(entries) != 0 {
			t.Errorf("podPidsLimit %d made %v", limit, entries)
		}
	}
}

func TestEnsureRefusesPathsOutsideKubepods(t *testing.T) {
	for _, parent := range []string{"/", "/kubepods", "/system.slice/x", "/kubepods/../etc", "kubepods/poda",
		"/kubepods/burstable/../../x", "/kubepodsx/poda", "/kubepods//poda"} {
		t.Run(parent, func(t *testing.T) {
			root := t.TempDir()
			mkdirs(t, filepath.Join(root, "pids"))
			m := &Manager{Root: root, Kubepods: "/kubepods", PidsLimit: 10}
			if err := m.Ensure(parent, podrules.PodCgroup{CPUShares: 2}); err == nil {
				t.Errorf("Ensure(%q) accepted", parent)
			}
		})
	}
}

func TestRemoveAndList(t *testing.T) {
	root := t.TempDir()
	for _, h := range []string{"pids", "memory", "cpu,cpuacct"} {
		mkdirs(t, filepath.Join(root, h, "kubepods/burstable/pod-a"), filepath.Join(root, h, "kubepods/pod-b"),
			filepath.Join(root, h, "kubepods/besteffort/pod-c/container1"))
	}
	if err := os.Symlink("cpu,cpuacct", filepath.Join(root, "cpu")); err != nil {
		t.Fatal(err)
	}
	m := &Manager{Root: root, Kubepods: "/kubepods"}
	fakeCgroupfs(m)
	got := m.List()
	slices.Sort(got)
	if want := []types.UID{"-a", "-b", "-c"}; !slices.Equal(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
	if err := m.Remove("-a"); err != nil {
		t.Errorf("Remove of an empty pod cgroup: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "memory/kubepods/burstable/pod-a")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the pod cgroup was left in the memory hierarchy")
	}
	if err := m.Remove("-c"); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("Remove of a pod cgroup with a container = %v, want busy", err)
	}
	if err := m.Remove("-gone"); err != nil {
		t.Errorf("Remove of a missing pod cgroup: %v", err)
	}
}

func TestRemoveRefusesHostileUIDs(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, filepath.Join(root, "pids/kubepods/x"))
	m := &Manager{Root: root, Kubepods: "/kubepods"}
	fakeCgroupfs(m)
	for _, uid := range []types.UID{"", "../x", "/../../etc", "a/b", ".."} {
		if err := m.Remove(uid); err == nil {
			t.Errorf("Remove(%q) accepted", uid)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "pids/kubepods/x")); err != nil {
		t.Error("a hostile UID removed a cgroup")
	}
}

// The kubelet's values for a Burstable pod with limits (podrules.PodCgroupResources), on v1: cpu.shares, the
// period before the quota, the memory limit, each in its own hierarchy.
func TestEnsureV1WritesTheKubeletsResourceValues(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, filepath.Join(root, "cpu"), filepath.Join(root, "memory"), filepath.Join(root, "pids"))
	m := &Manager{Root: root, Kubepods: "/kubepods", Resources: true}
	fakeCgroupfs(m)
	quota, mem := int64(20000), int64(200<<20)
	if err := m.Ensure("/kubepods/burstable/pod1", podrules.PodCgroup{CPUShares: 102, CPUQuota: &quota, MemoryLimit: &mem}); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"cpu/kubepods/burstable/pod1/cpu.shares":               "102",
		"cpu/kubepods/burstable/pod1/cpu.cfs_period_us":        "100000",
		"cpu/kubepods/burstable/pod1/cpu.cfs_quota_us":         "20000",
		"memory/kubepods/burstable/pod1/memory.limit_in_bytes": "209715200",
	} {
		if got := read(t, filepath.Join(root, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "pids/kubepods")); err == nil {
		t.Error("a pids cgroup was made without podPidsLimit")
	}
	// BestEffort: the minimum shares, no quota, no memory limit.
	if err := m.Ensure("/kubepods/besteffort/pod2", podrules.PodCgroup{CPUShares: 2}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(root, "cpu/kubepods/besteffort/pod2/cpu.shares")); got != "2" {
		t.Errorf("besteffort cpu.shares = %q, want 2", got)
	}
	for _, f := range []string{"cpu/kubepods/besteffort/pod2/cpu.cfs_quota_us", "memory/kubepods/besteffort/pod2/memory.limit_in_bytes"} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			t.Errorf("%s written for a BestEffort pod", f)
		}
	}
}

// On v2 the same values are cpu.weight (runc's conversion of shares), cpu.max and memory.max, with cpu and
// memory enabled down to the pod cgroup.
func TestEnsureV2WritesTheKubeletsResourceValues(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, subtreeControl), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m := &Manager{Root: root, Unified: true, Kubepods: "/kubepods", Resources: true}
	fakeCgroupfs(m)
	quota, mem := int64(10000), int64(100<<20)
	if err := m.Ensure("/kubepods/pod3", podrules.PodCgroup{CPUShares: 102, CPUQuota: &quota, MemoryLimit: &mem}); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"kubepods/pod3/cpu.weight": "4", "kubepods/pod3/cpu.max": "10000 100000", "kubepods/pod3/memory.max": "104857600",
	} {
		if got := read(t, filepath.Join(root, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if got := read(t, filepath.Join(root, "kubepods", subtreeControl)); got != "+memory" {
		t.Errorf("kubepods/cgroup.subtree_control last written %q, want +memory (after +cpu)", got)
	}
}

// The QoS cgroups get the kubelet's cpu values: besteffort the minimum, burstable the shares of the
// Burstable pods' summed requests (cpu.weight on v2).
func TestUpdateQoSWritesTheKubeletsShares(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, filepath.Join(root, "cpu"))
	m := &Manager{Root: root, Kubepods: "/kubepods", Resources: true}
	fakeCgroupfs(m)
	if err := m.UpdateQoS(150); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(root, "cpu/kubepods/besteffort/cpu.shares")); got != "2" {
		t.Errorf("besteffort cpu.shares = %q, want 2", got)
	}
	if got := read(t, filepath.Join(root, "cpu/kubepods/burstable/cpu.shares")); got != "153" {
		t.Errorf("burstable cpu.shares = %q, want 153 (150m)", got)
	}

	v2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(v2, subtreeControl), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m = &Manager{Root: v2, Unified: true, Kubepods: "/kubepods", Resources: true}
	fakeCgroupfs(m)
	if err := m.UpdateQoS(0); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"besteffort", "burstable"} {
		if got := read(t, filepath.Join(v2, "kubepods", q, "cpu.weight")); got != "1" {
			t.Errorf("%s cpu.weight = %q, want 1", q, got)
		}
	}
	if err := (&Manager{Root: t.TempDir(), Kubepods: "/kubepods"}).UpdateQoS(100); err != nil {
		t.Errorf("without Resources: %v", err)
	}
}

// ListMemory looks in the memory hierarchy only on cgroup v1; List in every one.
func TestListMemory(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, filepath.Join(root, "memory", "kubepods/burstable/pod-a"), filepath.Join(root, "pids", "kubepods/burstable/pod-a"),
		filepath.Join(root, "pids", "kubepods/besteffort/pod-left"))
	m := &Manager{Root: root, Kubepods: "/kubepods"}
	fakeCgroupfs(m)
	if got := m.ListMemory(); !slices.Equal(got, []types.UID{"-a"}) {
		t.Errorf("ListMemory = %v, want [-a]", got)
	}
	got := m.List()
	slices.Sort(got)
	if want := []types.UID{"-a", "-left"}; !slices.Equal(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
}
