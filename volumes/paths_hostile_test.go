package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podrules/podrulestest"
)

func refused(t *testing.T, fn, path string, err error) {
	t.Helper()
	if !errors.Is(err, podrules.ErrUnsafePathSegment) || path != "" {
		t.Errorf("%s = %q, %v; want no path and ErrUnsafePathSegment", fn, path, err)
	}
}

// TestPathBuildersRefuseHostileIdentifiers runs every hostile identifier through every function of this
// package that builds a path from a pod's UID, a volume name or a container name, and through SetUp,
// Mounts and TearDown, which use them: nothing is created or removed outside the agent's root dir.
func TestPathBuildersRefuseHostileIdentifiers(t *testing.T) {
	for _, h := range podrulestest.HostileSegments() {
		t.Run(h.Name, func(t *testing.T) {
			env := newTestEnv(t)
			m, v := env.m, h.Value
			outside := filepath.Dir(m.RootDir)
			before := listDir(t, outside)

			p, err := m.podDir(types.UID(v))
			refused(t, "podDir", p, err)
			p, err = m.volumeDir(types.UID(v), pluginEmptyDir, "scratch")
			refused(t, "volumeDir with a hostile UID", p, err)
			p, err = m.volumeDir("uid-1", pluginEmptyDir, v)
			refused(t, "volumeDir with a hostile volume name", p, err)
			p, err = m.subp().subPathDir(types.UID(v), "scratch", "c", 0)
			refused(t, "subPathDir with a hostile UID", p, err)
			p, err = m.subp().subPathDir("uid-1", v, "c", 0)
			refused(t, "subPathDir with a hostile volume name", p, err)
			p, err = m.subp().subPathDir("uid-1", "scratch", v, 0)
			refused(t, "subPathDir with a hostile container name", p, err)

			emptyDir := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
			pod := newPod(vol("scratch", emptyDir))
			pod.UID = types.UID(v)
			if errs := m.SetUp(context.Background(), pod); len(errs) != 1 || !errors.Is(errs[0], podrules.ErrUnsafePathSegment) {
				t.Errorf("SetUp of a pod with a hostile UID: %v, want ErrUnsafePathSegment", errs)
			}
			pod = newPod(vol(v, emptyDir))
			pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: v, MountPath: "/data"}}
			if _, err := m.Mounts(pod, &pod.Spec.Containers[0], nil); !errors.Is(err, podrules.ErrUnsafePathSegment) {
				t.Errorf("Mounts of a volume with a hostile name: %v, want ErrUnsafePathSegment", err)
			}
			// Tried only where a regression could not remove a host directory: podDir's refusal covers the rest.
			if rel, err := filepath.Rel(outside, filepath.Join(m.RootDir, "pods", v)); err == nil && filepath.IsLocal(rel) {
				if err := m.TearDown(context.Background(), types.UID(v)); err != nil {
					t.Errorf("TearDown of a hostile UID: %v, want nothing to do", err)
				}
			}
			if after := listDir(t, outside); !equalStrings(before, after) {
				t.Errorf("the root's parent changed: %v, then %v", before, after)
			}
			if env.mounter.callsWith("") != nil {
				t.Errorf("mounter calls: %v", env.mounter.callsWith(""))
			}
		})
	}
}

// TestTearDownNeverLeavesItsRoot: a UID that would name a directory next to the root (from a runtime
// label, say) removes nothing there.
func TestTearDownNeverLeavesItsRoot(t *testing.T) {
	env := newTestEnv(t)
	victim := filepath.Join(filepath.Dir(env.m.RootDir), "victim")
	if err := os.MkdirAll(filepath.Join(victim, "volumes"), 0o755); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(filepath.Join(env.m.RootDir, "pods"), victim)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.m.TearDown(context.Background(), types.UID(rel)); err != nil {
		t.Fatalf("TearDown(%q): %v", rel, err)
	}
	if _, err := os.Stat(filepath.Join(victim, "volumes")); err != nil {
		t.Errorf("TearDown(%q) removed %s: %v", rel, victim, err)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
