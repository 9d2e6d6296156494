package volumes

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// A pod's disk volumes are measured as du measures them, once per StatsPeriod.
func TestStats(t *testing.T) {
	root := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	m := &Manager{RootDir: root, Clock: clk}
	dir := filepath.Join(root, "pods", "uid1", "volumes", pluginEmptyDir, "scratch")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, n int) {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a", 1<<20)
	st := m.Stats("uid1")
	if len(st) != 1 || st[0].Name != "scratch" {
		t.Fatalf("stats %+v", st)
	}
	used := *st[0].UsedBytes
	if used < 1<<20 || *st[0].InodesUsed != 2 || st[0].CapacityBytes == nil {
		t.Errorf("used %d bytes, %d inodes, capacity %v; want at least 1 MiB, 2 inodes (dir and file)", used, *st[0].InodesUsed, st[0].CapacityBytes)
	}
	write("b", 1<<20)
	if again := m.Stats("uid1"); *again[0].UsedBytes != used {
		t.Error("measured again within the period")
	}
	clk.Step(StatsPeriod)
	if again := m.Stats("uid1"); *again[0].UsedBytes < used+1<<20 || *again[0].InodesUsed != 3 {
		t.Errorf("after the period: %d bytes, %d inodes", *again[0].UsedBytes, *again[0].InodesUsed)
	}
	if st := m.Stats("../etc"); st != nil {
		t.Errorf("an invalid UID was measured: %+v", st)
	}
}
