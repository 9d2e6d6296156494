package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

func spec(containers []string, leaf string, state types.SpecState, runTime time.Duration) types.SpecReport {
	sp := types.SpecReport{ContainerHierarchyTexts: containers, LeafNodeText: leaf, LeafNodeType: types.NodeTypeIt,
		State: state, RunTime: runTime}
	if state.Is(types.SpecStateFailureStates) {
		sp.Failure.Message = "it went wrong\nsecond line"
	}
	return sp
}

// skippedAtRunTime is a spec that e2eskipper skipped (the spec ran and said why), not one left out by focus.
func skippedAtRunTime(containers []string, leaf string) types.SpecReport {
	sp := spec(containers, leaf, types.SpecStateSkipped, time.Second)
	sp.Failure.Message = "Driver local doesn't support Block -- skipping"
	return sp
}

// writeReport writes a ginkgo JSON report of specs into dir and returns its path.
func writeReport(t *testing.T, dir string, specs ...types.SpecReport) string {
	t.Helper()
	b, err := json.Marshal([]types.Report{{SpecReports: specs}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "report.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestGroupOf(t *testing.T) {
	for _, tc := range []struct {
		containers []string
		want       string
	}{
		{[]string{"[sig-storage] In-tree Volumes", "[Driver: local] [LocalVolumeType: dir]", "[Testpattern: Inline-volume]", "subPath"},
			"[sig-storage] In-tree Volumes [Driver: local]"},
		{[]string{"[sig-storage] CSI Volumes", "[Driver: csi-hostpath]", "[Testpattern: Dynamic PV (default fs)]"},
			"[sig-storage] CSI Volumes [Driver: csi-hostpath]"},
		{[]string{"[sig-storage] CSI Mock PVC Unused Condition [FeatureGate:PersistentVolumeClaimUnusedSinceTime]", "x"},
			"[sig-storage] CSI Mock PVC Unused Condition"},
		{[]string{"[sig-storage] PersistentVolumes-local", "[LocalVolumeType: dir]"}, "[sig-storage] PersistentVolumes-local"},
		{[]string{"[sig-node] Pods"}, "[sig-node] Pods"},
		{nil, "a bare spec"},
	} {
		if got := groupOf(spec(tc.containers, "a bare spec", types.SpecStatePassed, 0)); got != tc.want {
			t.Errorf("groupOf(%q) = %q, want %q", tc.containers, got, tc.want)
		}
	}
}

func TestGroupsCountAndTime(t *testing.T) {
	local := []string{"[sig-storage] In-tree Volumes", "[Driver: local] [LocalVolumeType: dir]"}
	mock := []string{"[sig-storage] CSI Mock volume attach"}
	path := writeReport(t, t.TempDir(),
		spec(local, "stores data", types.SpecStatePassed, 30*time.Second),
		spec(local, "allows exec", types.SpecStateFailed, 90*time.Second),
		skippedAtRunTime(local, "needs block"),
		spec(mock, "attaches", types.SpecStatePassed, 10*time.Second),
		spec(mock, "left out by focus", types.SpecStateSkipped, 0))
	s, err := load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "passed failed skipped spec-time  group\n" +
		"     1      0       0       10s  [sig-storage] CSI Mock volume attach\n" +
		"     1      1       1      2m1s  [sig-storage] In-tree Volumes [Driver: local]\n" +
		"     2      1       1     2m11s  total\n"
	if got := s.groups.String(); got != want {
		t.Errorf("groups:\n%s\nwant:\n%s", got, want)
	}
}

func TestComparePassed(t *testing.T) {
	dir := t.TempDir()
	kubelet := filepath.Join(dir, "kubelet.txt")
	if err := os.WriteFile(kubelet, []byte("a\nb\n\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The other run as a JSON report: b failed, d passed.
	nodelet := writeReport(t, dir,
		spec([]string{"a"}, "", types.SpecStatePassed, 0),
		spec([]string{"b"}, "", types.SpecStateFailed, 0),
		spec([]string{"c"}, "", types.SpecStatePassed, 0),
		spec([]string{"d"}, "", types.SpecStatePassed, 0))
	a, err := loadPassed(kubelet)
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadPassed(nodelet)
	if err != nil {
		t.Fatal(err)
	}
	d := comparePassed(a, b)
	if strings.Join(d.onlyA, ",") != "b" || strings.Join(d.onlyB, ",") != "d" {
		t.Fatalf("comparePassed = %+v, want onlyA [b], onlyB [d]", d)
	}
	var out strings.Builder
	d.print(&out, runName(kubelet), runName(nodelet))
	want := "passed by kubelet.txt and not by " + filepath.Base(dir) + ": 1\n  b\n" +
		"passed by " + filepath.Base(dir) + " and not by kubelet.txt: 1\n  d\n"
	if out.String() != want {
		t.Errorf("print:\n%s\nwant:\n%s", out.String(), want)
	}
	if rc := runCompare(io.Discard, []string{kubelet, nodelet}); rc != 1 {
		t.Errorf("runCompare of different runs = %d, want 1", rc)
	}
	if rc := runCompare(io.Discard, []string{kubelet, kubelet}); rc != 0 {
		t.Errorf("runCompare of a run with itself = %d, want 0", rc)
	}
	if rc := runCompare(io.Discard, []string{kubelet, filepath.Join(dir, "missing.txt")}); rc != 2 {
		t.Errorf("runCompare with a missing file = %d, want 2", rc)
	}
}
