package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodelet/nodelet/machine"
)

// The node's memory in /stats/summary has the root memory cgroup's RSS and page faults, and so has the "pods"
// system container its cgroup's, as the kubelet's summary (what the upstream e2e framework's resource
// collector reads without a nil check).
func TestNodeStatsMemoryHasRSSAndPageFaults(t *testing.T) {
	root := t.TempDir()
	for name, content := range map[string]string{
		"proc/stat":               "cpu  100 0 100 1000 0 0 0 0 0 0\nbtime 1700000000\n",
		"proc/meminfo":            "MemTotal: 8000000 kB\nMemFree: 1000000 kB\nMemAvailable: 4000000 kB\n",
		"proc/sys/kernel/pid_max": "4194304\n",
		"proc/loadavg":            "0.00 0.01 0.05 1/300 12345\n",
		"sys/fs/cgroup/memory/memory.usage_in_bytes":          "4096000\n",
		"sys/fs/cgroup/memory/memory.stat":                    "total_rss 3000\ntotal_inactive_file 1000\npgfault 70\npgmajfault 7\n",
		"sys/fs/cgroup/memory/kubepods/memory.usage_in_bytes": "2048000\n",
		"sys/fs/cgroup/memory/kubepods/memory.stat":           "total_rss 2000\ntotal_inactive_file 100\npgfault 50\npgmajfault 5\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := nodeStats(machine.Reader{HostRoot: root, FsPath: root}, "/kubepods")
	if err != nil {
		t.Fatal(err)
	}
	m := n.Memory
	if m.RSSBytes == nil || *m.RSSBytes != 3000 || m.PageFaults == nil || *m.PageFaults != 70 || m.MajorPageFaults == nil || *m.MajorPageFaults != 7 {
		t.Errorf("node memory %+v, want RSS 3000, 70 page faults, 7 major", m)
	}
	if len(n.SystemContainers) != 1 || n.SystemContainers[0].Memory.RSSBytes == nil || *n.SystemContainers[0].Memory.RSSBytes != 2000 {
		t.Errorf("system containers %+v, want pods with RSS 2000", n.SystemContainers)
	}
}
