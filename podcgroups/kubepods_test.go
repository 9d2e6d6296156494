package podcgroups

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodelet/nodelet/podrules"
)

func TestKubepodsValues(t *testing.T) {
	// This machine's kubelet tree: 2 cpus, 25276514304 bytes, pid_max 32768, nothing reserved.
	if got := KubepodsValues(2000, 25276514304, 32768, true, 0, 0, 0); !reflect.DeepEqual(got, Kubepods{MilliCPU: 2000, MemoryBytes: 25276514304, Pids: 32768}) {
		t.Errorf("nothing reserved: %+v", got)
	}
	if got := KubepodsValues(2000, 4<<30, 32768, true, 500, 1<<30, 1000); !reflect.DeepEqual(got, Kubepods{MilliCPU: 1500, MemoryBytes: 3 << 30, Pids: 31768}) {
		t.Errorf("pods enforced: %+v", got)
	}
	if got := KubepodsValues(2000, 4<<30, 32768, false, 500, 1<<30, 1000); !reflect.DeepEqual(got, Kubepods{MilliCPU: 2000, MemoryBytes: 4 << 30, Pids: 32768}) {
		t.Errorf("not enforced: capacity %+v", got)
	}
	if got := KubepodsValues(1000, 1<<30, 0, true, 2000, 2<<30, 0); !reflect.DeepEqual(got, Kubepods{MilliCPU: 0, MemoryBytes: 0, Pids: 0}) {
		t.Errorf("reserved beyond capacity: %+v", got)
	}
}

func TestEnsureKubepods(t *testing.T) {
	t.Run("v1", func(t *testing.T) {
		root := t.TempDir()
		mkdirs(t, filepath.Join(root, "cpu"), filepath.Join(root, "memory"), filepath.Join(root, "pids"))
		m := &Manager{Root: root, Kubepods: "/kubepods"}
		fakeCgroupfs(m)
		if err := m.EnsureKubepods(Kubepods{MilliCPU: 1500, MemoryBytes: 3 << 30, Pids: 31768}); err != nil {
			t.Fatal(err)
		}
		for file, want := range map[string]string{"cpu/kubepods/cpu.shares": "1536",
			"memory/kubepods/memory.limit_in_bytes": "3221225472", "pids/kubepods/pids.max": "31768"} {
			if got := read(t, filepath.Join(root, file)); got != want {
				t.Errorf("%s = %q, want %q", file, got, want)
			}
		}
	})
	t.Run("v2", func(t *testing.T) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, subtreeControl), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		m := &Manager{Root: root, Unified: true, Kubepods: "/kubepods"}
		fakeCgroupfs(m)
		if err := m.EnsureKubepods(Kubepods{MilliCPU: 2000, MemoryBytes: 1 << 30}); err != nil {
			t.Fatal(err)
		}
		for file, want := range map[string]string{"kubepods/cpu.weight": "79", "kubepods/memory.max": "1073741824"} {
			if got := read(t, filepath.Join(root, file)); got != want {
				t.Errorf("%s = %q, want %q", file, got, want)
			}
		}
	})
}

func TestCgroupManagerDurationMetric(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, filepath.Join(root, "cpu"), filepath.Join(root, "memory"), filepath.Join(root, "pids"))
	m := &Manager{Root: root, Kubepods: "/kubepods", PidsLimit: 10, Resources: true}
	fakeCgroupfs(m)
	reg := prometheus.NewRegistry()
	if err := m.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if err := m.EnsureKubepods(Kubepods{MilliCPU: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := m.Ensure("/kubepods/burstable/poduid1", podrules.PodCgroup{CPUShares: 2}); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("uid1"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "kubelet_cgroup_manager_duration_seconds"); err != nil || n != 3 {
		t.Errorf("series: %d, %v (want create, update, destroy)", n, err)
	}
}

func TestProcesses(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, filepath.Join(root, "pids/kubepods/burstable/poduid1"))
	if err := os.WriteFile(filepath.Join(root, "pids/kubepods/burstable/poduid1/pids.current"), []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &Manager{Root: root, Kubepods: "/kubepods"}
	if n, ok := m.Processes("uid1"); !ok || n != 7 {
		t.Errorf("Processes(uid1) = %d, %v", n, ok)
	}
	if _, ok := m.Processes("uid2"); ok {
		t.Error("a pod without a pids cgroup has a count")
	}
	if _, ok := m.Processes("../x"); ok {
		t.Error("an invalid UID was read")
	}
}
