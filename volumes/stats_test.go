package volumes

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
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

// A pod whose local storage has a limit has its volumes measured every LimitedStatsPeriod, so that the
// eviction manager sees an emptyDir past its sizeLimit within seconds.
func TestStatsOfALimitedPodAreFresher(t *testing.T) {
	env := newTestEnv(t)
	limit := resource.MustParse("10Mi")
	limited := newPod(vol("scratch", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}))
	plain := newPod(vol("scratch", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}))
	plain.UID = "uid-2"
	for _, p := range []*corev1.Pod{limited, plain} {
		mustSetUp(t, env.m, p)
	}
	used := func(uid types.UID) uint64 {
		st := env.m.Stats(uid)
		if len(st) != 1 {
			t.Fatalf("%s: stats %+v", uid, st)
		}
		return *st[0].UsedBytes
	}
	before := map[types.UID]uint64{"uid-1": used("uid-1"), "uid-2": used("uid-2")}
	for _, uid := range []types.UID{"uid-1", "uid-2"} {
		f := filepath.Join(env.m.RootDir, "pods", string(uid), "volumes", pluginEmptyDir, "scratch", "fill")
		if err := os.WriteFile(f, make([]byte, 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env.clock.Step(LimitedStatsPeriod)
	if got := used("uid-1"); got < before["uid-1"]+1<<20 {
		t.Errorf("limited pod after %s: %d bytes, want the new MiB counted", LimitedStatsPeriod, got)
	}
	if got := used("uid-2"); got != before["uid-2"] {
		t.Errorf("unlimited pod measured again after %s (%d bytes): its period is %s", LimitedStatsPeriod, got, StatsPeriod)
	}
}
