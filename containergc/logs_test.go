package containergc

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules/podrulestest"
)

func writeFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("log\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// filesIn lists the files below dir, relative, sorted.
func filesIn(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// A removed container's log file and its rotated files go with it; the kept attempts' logs, and files that
// only look alike, stay.
func TestContainerLogsRemoved(t *testing.T) {
	h := newHarness(t, defaultPolicy)
	h.pods.pods = map[types.UID]bool{"a": false}
	logs := h.c.podLogs
	podDir := "ns_pod-a_a/app/"
	writeFiles(t, logs, podDir+"0.log", podDir+"0.log.20260102-030405.gz", podDir+"0.log.20260102-030505", podDir+"0.log.tmp",
		podDir+"1.log", podDir+"10.log", podDir+"0.logx", podDir+"2.log", podDir+"3.log")
	crashLoop(h.rt, "a", 4, running)
	// Attempt 0's status names its log; attempt 1's does not: its path is nodelet's own, from the labels
	// and the restart count annotation.
	h.rt.logPaths["a-app-0"] = filepath.Join(logs, podDir+"0.log")
	h.collect(t)
	want := []string{podDir + "0.logx", podDir + "10.log", podDir + "2.log", podDir + "3.log"}
	if got := filesIn(t, logs); !slices.Equal(got, want) {
		t.Errorf("log files left %v, want %v", got, want)
	}
}

// A log path outside the pod logs directory (a runtime's, or forged labels') is never removed; the
// container still goes.
func TestLogOutsideThePodLogsDirIsLeftAlone(t *testing.T) {
	h := newHarness(t, defaultPolicy)
	outside := t.TempDir()
	writeFiles(t, outside, "victim.log")
	h.rt.container("gone", "app", 0, time.Minute, exited)
	h.rt.logPaths["gone-app-0"] = filepath.Join(outside, "victim.log")
	h.rt.container("gone", "web", 0, time.Minute, exited)
	h.rt.logPaths["gone-web-0"] = filepath.Join(h.c.podLogs, "..", filepath.Base(outside), "victim.log")
	h.collect(t)
	if got := filesIn(t, outside); !slices.Equal(got, []string{"victim.log"}) {
		t.Errorf("files left outside %v, want victim.log", got)
	}
	if got := h.rt.containerIDs(); len(got) != 0 {
		t.Errorf("containers left %v, want none", got)
	}
}

// Hostile identifiers in a container's labels build no log path: nothing is removed but the container.
func TestHostileLabelsBuildNoLogPath(t *testing.T) {
	for _, tc := range podrulestest.HostileSegments() {
		t.Run(tc.Name, func(t *testing.T) {
			h := newHarness(t, defaultPolicy)
			writeFiles(t, h.c.podLogs, "keep.log", "ns_pod-x_x/app/0.log")
			id := h.rt.container("x", "app", 0, time.Minute, exited)
			h.rt.containers[id].Labels["io.kubernetes.pod.name"] = tc.Value
			h.collect(t)
			if got := filesIn(t, h.c.podLogs); !slices.Contains(got, "keep.log") {
				t.Errorf("files left %v", got)
			}
			if got := h.rt.containerIDs(); len(got) != 0 {
				t.Errorf("containers left %v, want none", got)
			}
		})
	}
}

// A container whose logs cannot be removed is kept for the next pass, as by the kubelet.
func TestLogRemovalFailureKeepsTheContainer(t *testing.T) {
	h := newHarness(t, defaultPolicy)
	writeFiles(t, h.c.podLogs, "ns_pod-gone_gone/app/0.log.d/x") // a directory os.Remove cannot remove
	h.rt.container("gone", "app", 0, time.Minute, exited)
	h.collect(t)
	if got := h.rt.containerIDs(); !slices.Equal(got, []string{"gone-app-0"}) {
		t.Errorf("containers left %v, want the one whose logs stay", got)
	}
	// So is one whose status cannot be read.
	h.rt.statusErr["gone-app-0"] = errors.New("runtime hiccup")
	h.collect(t)
	if got := h.rt.containerIDs(); len(got) != 1 {
		t.Errorf("containers left %v after a status failure, want it kept", got)
	}
}

func TestLegacySymlinks(t *testing.T) {
	legacy := t.TempDir()
	h := newHarness(t, defaultPolicy, func(o *Options) { o.LegacyLogsDir = legacy })
	h.pods.pods = map[types.UID]bool{"a": false}
	logs := h.c.podLogs
	writeFiles(t, logs, "ns_pod-a_a/app/2.log", "ns_pod-a_a/app/3.log")
	crashLoop(h.rt, "a", 4, running) // a-app-0 and a-app-1 go
	// Runtimes' IDs have no dashes: the running one gets one like theirs.
	c := h.rt.containers["a-app-3"]
	delete(h.rt.containers, c.Id)
	c.Id = "abcdef0123456789"
	h.rt.containers[c.Id] = c
	link := func(name, target string) {
		if err := os.Symlink(target, filepath.Join(legacy, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("pod-a_ns_app-a-app-0.log", filepath.Join(logs, "ns_pod-a_a/app/0.log"))          // its container goes
	writeFiles(t, legacy, "pod-a_ns_app-a-app-1.log")                                      // not a symlink: stays
	link("pod-a_ns_app-a-app-2.log", filepath.Join(logs, "ns_pod-a_a/app/2.log"))          // log there: stays
	link("pod-a_ns_app-abcdef0123456789.log", filepath.Join(logs, "ns_pod-a_a/app/9.log")) // dangling, but runs: stays
	link("old_ns_app-0123456789ab.log", filepath.Join(logs, "ns_old_u/app/0.log"))         // dangling, unknown: goes
	link("short_ns_app-abc.log", filepath.Join(logs, "nowhere"))                           // dangling, no ID: goes
	h.collect(t)
	var got []string
	entries, err := os.ReadDir(legacy)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{"pod-a_ns_app-a-app-1.log", "pod-a_ns_app-a-app-2.log", "pod-a_ns_app-abcdef0123456789.log"}
	if !slices.Equal(got, want) {
		t.Errorf("legacy dir %v, want %v", got, want)
	}
}

func TestLegacySymlinkName(t *testing.T) {
	st := &runtimeapi.ContainerStatus{Id: "0123456789abcdef", Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Labels: map[string]string{"io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "default"}}
	if got, ok := legacySymlink("/var/log/containers", st); !ok || got != "/var/log/containers/web_default_app-0123456789abcdef.log" {
		t.Errorf("legacySymlink = %q, %v", got, ok)
	}
	long := &runtimeapi.ContainerStatus{Id: "0123456789abcdef", Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Labels: map[string]string{"io.kubernetes.pod.name": strings.Repeat("p", 250), "io.kubernetes.pod.namespace": "default"}}
	if got, ok := legacySymlink("/d", long); !ok || len(filepath.Base(got)) != 255 || filepath.Ext(got) != ".log" {
		t.Errorf("long legacySymlink = %q (%d bytes), %v", got, len(filepath.Base(got)), ok)
	}
	if _, ok := legacySymlink("", st); ok {
		t.Error("a symlink without a directory")
	}
	for _, tc := range podrulestest.HostileSegments() {
		bad := &runtimeapi.ContainerStatus{Id: "0123456789abcdef", Metadata: &runtimeapi.ContainerMetadata{Name: tc.Value},
			Labels: map[string]string{"io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "default"}}
		if got, ok := legacySymlink("/var/log/containers", bad); ok {
			t.Errorf("container name %q: symlink %q", tc.Value, got)
		}
	}
}

func TestPodLogDirectories(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ready bool
		want  []string
	}{
		{"sources ready: gone pods' directories without containers go", true,
			[]string{"kube-system_etcd_s", "ns_a_a", "ns_runs_r", "stray", "x_y"}},
		{"sources not ready: nothing goes", false,
			[]string{"kube-system_etcd_s", "ns_a_a", "ns_gone_g", "ns_runs_r", "stray", "x_y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, defaultPolicy)
			h.pods.pods, h.pods.ready = map[types.UID]bool{"a": false, "s": false}, tc.ready
			logs := h.c.podLogs
			writeFiles(t, logs, "ns_a_a/app/0.log", "ns_gone_g/app/0.log", "ns_runs_r/app/0.log",
				"kube-system_etcd_s/etcd/0.log", "stray/x", "x_y/z")
			h.rt.container("r", "app", 0, time.Minute, running)
			h.collect(t)
			entries, err := os.ReadDir(logs)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("pod log directories %v, want %v", got, tc.want)
			}
		})
	}
}

// A node without a pod logs directory has none to clean.
func TestMissingPodLogsDir(t *testing.T) {
	h := newHarness(t, defaultPolicy, func(o *Options) { o.PodLogsDir = filepath.Join(t.TempDir(), "none") })
	h.collect(t)
}
