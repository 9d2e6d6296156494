package podsyncer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podrules/podrulestest"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// hostileBed is an agent's root and pod logs directories next to a victim directory that hostile
// identifiers could name.
type hostileBed struct {
	base, victim string
	r            *Syncer
}

func newHostileBed(t *testing.T) *hostileBed {
	t.Helper()
	base := t.TempDir()
	b := &hostileBed{base: base, victim: filepath.Join(base, "victim")}
	for _, d := range []string{filepath.Join(base, "root", "pods"), filepath.Join(base, "logs"), b.victim} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b.r = newTestSyncer(t, Deps{}, Options{RootDir: filepath.Join(base, "root"), Sandbox: podconfig.SandboxOptions{PodLogsDir: filepath.Join(base, "logs")}})
	return b
}

// unchanged checks that nothing appeared or vanished next to the agent's directories.
func (b *hostileBed) unchanged(t *testing.T, what string) {
	t.Helper()
	entries, err := os.ReadDir(b.base)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"logs", "root", "victim"}) {
		t.Errorf("%s: the agent's base dir holds %v", what, names)
	}
	if _, err := os.Stat(b.victim); err != nil {
		t.Errorf("%s removed %s: %v", what, b.victim, err)
	}
}

// contained reports whether every directory the worker's identifiers could name without validation lies
// inside the bed, so that trying to remove them is harmless even if the validation regressed.
func (b *hostileBed) contained(w *PodState) bool {
	for _, p := range []string{
		filepath.Join(b.r.rootDir, "pods", string(w.UID)),
		filepath.Join(b.r.sandboxOpts.PodLogsDir, w.Key.Namespace+"_"+w.Key.Name+"_"+string(w.UID)),
	} {
		rel, err := filepath.Rel(b.base, p)
		if err != nil || !filepath.IsLocal(rel) {
			return false
		}
	}
	return true
}

// TestRemovePodNeverLeavesItsRoots: a pod known only from the runtime, whose labels carry a hostile UID,
// namespace or name, is removed without touching anything outside the agent's directories.
func TestRemovePodNeverLeavesItsRoots(t *testing.T) {
	b := newHostileBed(t)
	toVictim, err := filepath.Rel(filepath.Join(b.r.rootDir, "pods"), b.victim)
	if err != nil {
		t.Fatal(err)
	}
	cases := append(podrulestest.HostileSegments(), podrulestest.HostileSegment{Name: "the victim", Value: toVictim})
	for _, h := range cases {
		for _, field := range []string{"uid", "namespace", "name"} {
			w := NewPodState("uid-1", types.NamespacedName{Namespace: "ns", Name: "web"})
			switch field {
			case "uid":
				w.UID = types.UID(h.Value)
			case "namespace":
				w.Key.Namespace = h.Value
			case "name":
				w.Key.Name = h.Value
			}
			if !b.contained(w) {
				continue // a regression must not remove a host directory: PodDir's own table covers it
			}
			if err := b.r.RemovePod(context.Background(), &Scope{State: w, Runtime: &runtime.PodStatus{}}); err != nil {
				t.Errorf("%s %s: removePod = %v, want nothing to remove", h.Name, field, err)
			}
			b.unchanged(t, h.Name+" "+field)
		}
	}
}

// TestMakePodDirsRefusesHostileUIDs: no directory is made for a pod whose UID is not a path segment.
func TestMakePodDirsRefusesHostileUIDs(t *testing.T) {
	b := newHostileBed(t)
	for _, h := range podrulestest.HostileSegments() {
		pod := &corev1.Pod{}
		pod.Namespace, pod.Name, pod.UID = "ns", "web", types.UID(h.Value)
		if err := b.r.config.makePodDirs(pod, ""); !errors.Is(err, podrules.ErrUnsafePathSegment) {
			t.Errorf("%s: makePodDirs = %v, want ErrUnsafePathSegment", h.Name, err)
		}
		b.unchanged(t, h.Name)
	}
}

// TestRemoveDir: a path builder's refusal means there is nothing to remove; its other errors are errors.
func TestRemoveDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	unsafe := podrules.PathSegment("pod UID", "..")
	other := errors.New("boom")
	for _, tc := range []struct {
		name    string
		err     error
		wantErr error
		gone    bool
	}{
		{"refused identifier", unsafe, nil, false},
		{"other error", other, other, false},
		{"a path", nil, nil, true},
	} {
		err := removeDir(dir, tc.err)
		_, statErr := os.Stat(dir)
		if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) || os.IsNotExist(statErr) != tc.gone {
			t.Errorf("%s: removeDir = %v (dir gone %v), want %v (gone %v)", tc.name, err, os.IsNotExist(statErr), tc.wantErr, tc.gone)
		}
	}
}
