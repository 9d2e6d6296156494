package machine

import (
	"os"
	"path/filepath"
	"testing"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The node's memory is measured as cAdvisor measures it for the kubelet: the root memory cgroup's usage
// less its inactive file pages, on cgroup v1 and v2; memory.available is capacity less that working set.
func TestRootMemoryAndAvailable(t *testing.T) {
	meminfo := "MemTotal:       1000 kB\nMemFree:         300 kB\nMemAvailable:    800 kB\n"
	for name, tc := range map[string]struct {
		files                    map[string]string
		usage, ws, avl           int64
		rss, pgfault, pgmajfault int64
	}{
		"v1": {map[string]string{
			"sys/fs/cgroup/memory/memory.usage_in_bytes": "512000\n",
			"sys/fs/cgroup/memory/memory.stat": "inactive_file 1\ntotal_inactive_file 102400\nrss 5\ntotal_rss 4096\n" +
				"pgfault 70\ntotal_pgfault 700\npgmajfault 7\ntotal_pgmajfault 77\n",
		}, 512000, 409600, 1024000 - 409600, 4096, 70, 7},
		"v2 root: MemTotal - MemFree": {map[string]string{
			"sys/fs/cgroup/memory.stat": "anon 8192\ninactive_file 204800\npgfault 90\npgmajfault 9\n",
		}, 716800, 512000, 1024000 - 512000, 8192, 90, 9},
		"inactive above usage: working set 0": {map[string]string{
			"sys/fs/cgroup/memory/memory.usage_in_bytes": "100\n",
			"sys/fs/cgroup/memory/memory.stat":           "total_inactive_file 200\n",
		}, 100, 0, 1024000, 0, 0, 0},
		"no memory cgroup: MemAvailable": {nil, 0, 0, 819200, 0, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, tc.files)
			writeTree(t, root, map[string]string{"proc/meminfo": meminfo})
			r := Reader{HostRoot: root}
			if tc.files != nil {
				m, err := r.RootMemory()
				if err != nil {
					t.Fatal(err)
				}
				if m.UsageBytes != tc.usage || m.WorkingSetBytes != tc.ws {
					t.Errorf("RootMemory = %+v, want usage %d working set %d", m, tc.usage, tc.ws)
				}
				if m.RSSBytes != tc.rss || m.PageFaults != tc.pgfault || m.MajorPageFaults != tc.pgmajfault {
					t.Errorf("RootMemory = %+v, want rss %d page faults %d major %d", m, tc.rss, tc.pgfault, tc.pgmajfault)
				}
			}
			var s Signals
			mem, err := r.meminfo()
			if err != nil {
				t.Fatal(err)
			}
			r.memorySignals(&s, mem)
			if s.MemoryAvailableBytes != tc.avl {
				t.Errorf("memory.available = %d, want %d", s.MemoryAvailableBytes, tc.avl)
			}
		})
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"sys/fs/cgroup/memory/kubepods/memory.usage_in_bytes":  "300\n",
		"sys/fs/cgroup/memory/kubepods/memory.stat":            "total_inactive_file 100\n",
		"sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes":  "1000\n",
		"sys/fs/cgroup/memory/unlimited/memory.usage_in_bytes": "300\n",
		"sys/fs/cgroup/memory/unlimited/memory.stat":           "total_inactive_file 100\n",
		"sys/fs/cgroup/memory/unlimited/memory.limit_in_bytes": "9223372036854771712\n",
	})
	r := Reader{HostRoot: root}
	m, err := r.CgroupMemory("/kubepods")
	if err != nil || m != (CgroupMemory{UsageBytes: 300, WorkingSetBytes: 200, LimitBytes: 1000}) {
		t.Errorf("kubepods: %+v, %v", m, err)
	}
	if m, err := r.CgroupMemory("/unlimited"); err != nil || m.LimitBytes != 0 {
		t.Errorf("unlimited: %+v, %v", m, err)
	}
}
