package staticpods

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// fileHarness runs a FileSource on a fake clock whose period never elapses unless a test steps it.
type fileHarness struct {
	t     *testing.T
	g     gomega.Gomega
	dir   string
	store *Store
	rec   *recorder
	clock *clocktesting.FakeClock
	ticks chan struct{}
}

const testPeriod = time.Hour

func startFileSource(t *testing.T, path string) *fileHarness {
	t.Helper()
	h := &fileHarness{t: t, g: newG(t), dir: path, rec: &recorder{}, clock: clocktesting.NewFakeClock(time.Now()), ticks: make(chan struct{}, 1)}
	h.store = NewStore(testNode, h.rec.Report)
	src := &FileSource{Path: path, Period: testPeriod, NodeName: testNode, Clock: h.clock, Store: h.store, Report: h.rec.Report}
	src.resynced = func() { h.ticks <- struct{}{} }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- src.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	// Started once the first read is done and the watch is set.
	h.g.Eventually(func() bool { return h.store.SeenSources(SourceFile) }).Should(gomega.BeTrue())
	return h
}

// settle steps the fake clock past the debounce only (never a period) until cond holds, so what cond
// sees came through fsnotify.
func (h *fileHarness) settle(cond func() bool, what string) {
	h.t.Helper()
	start := h.clock.Now()
	h.g.Eventually(func() bool {
		h.clock.Step(debounceDelay)
		return cond()
	}).Should(gomega.BeTrue(), what)
	if h.clock.Since(start) >= testPeriod {
		h.t.Fatalf("%s needed a period tick", what)
	}
}

// resync fires one period tick and waits until the source has re-read everything.
func (h *fileHarness) resync() {
	h.t.Helper()
	h.clock.Step(testPeriod)
	select {
	case <-h.ticks:
	case <-time.After(10 * time.Second):
		h.t.Fatal("no periodic re-read")
	}
}

func (h *fileHarness) uid(name string) types.UID {
	pod, ok := h.store.Get(key(name))
	if !ok {
		return ""
	}
	return pod.UID
}

func (h *fileHarness) has(name string) func() bool {
	return func() bool { return h.uid(name) != "" }
}

func TestFileSourceWatch(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "a.yaml"), podYAML("a", "nginx:1.27"))
	h := startFileSource(t, dir)
	if h.uid("a") == "" {
		t.Fatal("a.yaml not read at start")
	}

	// A new file comes through fsnotify, before any period tick.
	writeAtomic(t, filepath.Join(dir, "b.yaml"), podYAML("b", "nginx:1.27"))
	h.settle(h.has("b"), "new file b.yaml")

	// An edit is a new pod.
	old := h.uid("b")
	writeAtomic(t, filepath.Join(dir, "b.yaml"), podYAML("b", "nginx:1.28"))
	h.settle(func() bool { return h.uid("b") != old && h.uid("b") != "" }, "edited b.yaml")

	// A removed file removes its pod.
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	h.settle(func() bool { return !h.has("b")() }, "removed b.yaml")

	// A dotfile is ignored, by the watch and by the full re-read.
	writeAtomic(t, filepath.Join(dir, ".hidden.yaml"), podYAML("hidden", "nginx:1.27"))
	writeAtomic(t, filepath.Join(dir, "c.yaml"), podYAML("c", "nginx:1.27"))
	h.settle(h.has("c"), "c.yaml")
	h.resync()
	h.g.Consistently(h.has("hidden")).Should(gomega.BeFalse())
	if reports := h.rec.all(); len(reports) != 0 {
		t.Errorf("reports %v, want none", reports)
	}
}

func TestFileSourceKeepsPodsOfABrokenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	writeAtomic(t, path, podYAML("a", "nginx:1.27"))
	h := startFileSource(t, dir)
	uid := h.uid("a")

	writeAtomic(t, path, string(garbage()))
	h.settle(func() bool { return h.rec.count(ReasonFailedToDecode, path) == 1 }, "garbage reported")
	h.resync()
	h.resync()
	h.g.Consistently(func() types.UID { return h.uid("a") }).Should(gomega.Equal(uid), "the running pod stays")
	if n := h.rec.count(ReasonFailedToDecode, path); n != 1 {
		t.Errorf("garbage reported %d times over three reads, want once", n)
	}

	// Fixed: the same content as before is the same pod; broken again: reported again.
	writeAtomic(t, path, podYAML("a", "nginx:1.27"))
	h.resync()
	writeAtomic(t, path, "kind: Pod\n")
	h.settle(func() bool { return h.rec.count(ReasonFailedToDecode, path, "apiVersion is missing") == 1 }, "second fault")
	if h.uid("a") != uid {
		t.Errorf("UID %s, want %s", h.uid("a"), uid)
	}
}

func TestFileSourceDuplicateFirstWins(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "b.yaml"), podYAML("web", "nginx:1.28"))
	writeAtomic(t, filepath.Join(dir, "a.yaml"), podYAML("web", "nginx:1.27"))
	h := startFileSource(t, dir)
	pod, ok := h.store.Get(key("web"))
	if !ok || pod.Spec.Containers[0].Image != "nginx:1.27" {
		t.Fatalf("pod = %v, want a.yaml's (nginx:1.27)", pod)
	}
	h.resync()
	if n := h.rec.count(ReasonDuplicate, filepath.Join(dir, "b.yaml")); n != 1 {
		t.Errorf("duplicate reported %d times, want once: %v", n, h.rec.all())
	}
}

// TestFileSourceBadEntries: entries that cannot be read are each reported once, and the good file next
// to them works.
func TestFileSourceBadEntries(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "good.yaml"), podYAML("good", "nginx:1.27"))
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte(podYAML("big", "nginx:1.27")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxManifestBytes+1); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, filepath.Join(dir, "missing-target"), filepath.Join(dir, "dangling.yaml"))
	mustSymlink(t, filepath.Join(dir, "loop2.yaml"), filepath.Join(dir, "loop1.yaml"))
	mustSymlink(t, filepath.Join(dir, "loop1.yaml"), filepath.Join(dir, "loop2.yaml"))
	if err := os.Mkdir(filepath.Join(dir, "subdir"), 0o700); err != nil {
		t.Fatal(err)
	}

	h := startFileSource(t, dir)
	h.resync()
	if !h.has("good")() || len(h.store.List()) != 1 {
		t.Errorf("store = %v, want only good", podNames(h.store.List()))
	}
	want := []struct{ reason, file, fragment string }{
		{ReasonTooLarge, "big.yaml", "manifest too large"},
		{ReasonFailedToRead, "fifo.yaml", "not a regular file"},
		{ReasonFailedToRead, "dangling.yaml", "no such file"},
		{ReasonFailedToRead, "loop1.yaml", "too many levels of symbolic links"},
		{ReasonFailedToRead, "loop2.yaml", "too many levels of symbolic links"},
		{ReasonFailedToRead, "subdir", "is a directory"},
	}
	for _, w := range want {
		if n := h.rec.count(w.reason, filepath.Join(dir, w.file), w.fragment); n != 1 {
			t.Errorf("%s: %d %s reports with %q, want 1", w.file, n, w.reason, w.fragment)
		}
	}
	if got := len(h.rec.all()); got != len(want) {
		t.Errorf("%d reports, want %d: %v", got, len(want), h.rec.all())
	}
}

func TestFileSourceUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root, which reads a mode 000 file anyway; FIFOs and symlink loops cover unreadable entries")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "secret.yaml")
	writeAtomic(t, path, podYAML("a", "nginx:1.27"))
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	h := startFileSource(t, dir)
	if n := h.rec.count(ReasonFailedToRead, path, "permission denied"); n != 1 {
		t.Errorf("%d permission reports, want 1: %v", n, h.rec.all())
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestFileSourceMissingDirectory: a missing path is reported and polled, then watched once it appears.
func TestFileSourceMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	h := startFileSource(t, dir)
	if n := h.rec.count(ReasonPathNotFound, dir); n != 1 {
		t.Fatalf("%d path-not-found reports, want 1: %v", n, h.rec.all())
	}
	h.resync()
	if n := h.rec.count(ReasonPathNotFound, dir); n != 1 {
		t.Errorf("missing path reported %d times over two reads, want once", n)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, filepath.Join(dir, "a.yaml"), podYAML("a", "nginx:1.27"))
	h.resync()
	h.g.Eventually(h.has("a")).Should(gomega.BeTrue())
	writeAtomic(t, filepath.Join(dir, "b.yaml"), podYAML("b", "nginx:1.27"))
	h.settle(h.has("b"), "b.yaml, through the watch set up after the directory appeared")

	// The directory removed: its pods go, as the kubelet.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	h.settle(func() bool { return len(h.store.List()) == 0 }, "directory removed")
}

func TestFileSourceSingleFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.yaml")
	writeAtomic(t, path, podYAML("web", "nginx:1.27"))
	writeAtomic(t, filepath.Join(dir, "other.yaml"), podYAML("other", "nginx:1.27"))
	h := startFileSource(t, path)
	if !h.has("web")() || h.has("other")() {
		t.Fatalf("store = %v, want only web", podNames(h.store.List()))
	}
	old := h.uid("web")
	writeAtomic(t, path, podYAML("web", "nginx:1.28"))
	h.settle(func() bool { return h.uid("web") != old && h.uid("web") != "" }, "edited single file")
}
