package eviction

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The kernel's memory threshold notification wakes the manager when the memory cgroup's usage crosses the
// threshold: a child memory cgroup, a threshold 8 MiB above its usage, and this process writing 32 MiB
// of tmpfs pages charged to it.
func TestMemcgNotifierFires(t *testing.T) {
	const root = "/sys/fs/cgroup/memory"
	if _, err := os.Stat(root + "/cgroup.event_control"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and a cgroup v1 memory hierarchy")
	}
	dir, err := os.MkdirTemp(root, "nodelet-notifier-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	usage := func() int64 {
		b, err := os.ReadFile(dir + "/memory.usage_in_bytes")
		if err != nil {
			t.Fatal(err)
		}
		v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return v
	}
	wake := make(chan struct{}, 1)
	n, err := startMemcgNotifier(dir, usage()+8<<20, wake)
	if err != nil {
		t.Fatal(err)
	}
	defer n.stop()
	// Charge 32 MiB of page cache to the cgroup: a shell joins it and writes a file.
	file := t.TempDir() + "/fill"
	script := "echo $$ > " + dir + "/cgroup.procs && dd if=/dev/zero of=" + file + " bs=1M count=32 2>/dev/null"
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("charge memory to the test cgroup: %v: %s", err, out)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification after usage crossed the threshold")
	}
}
