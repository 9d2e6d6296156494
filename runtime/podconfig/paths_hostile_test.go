package podconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podrules/podrulestest"
	"github.com/nodelet/nodelet/runtime"
)

// refused checks that a path builder turned a hostile identifier into an ErrUnsafePathSegment and no path.
func refused(t *testing.T, fn, path string, err error) {
	t.Helper()
	if !errors.Is(err, podrules.ErrUnsafePathSegment) || path != "" {
		t.Errorf("%s = %q, %v; want no path and ErrUnsafePathSegment", fn, path, err)
	}
}

// TestPathBuildersRefuseHostileIdentifiers runs every hostile identifier through every function of this
// package that builds a path from a pod's UID, namespace, name or container name.
func TestPathBuildersRefuseHostileIdentifiers(t *testing.T) {
	for _, h := range podrulestest.HostileSegments() {
		t.Run(h.Name, func(t *testing.T) {
			v := h.Value
			p, err := PodDir("/var/lib/nodelet", types.UID(v))
			refused(t, "PodDir", p, err)
			for _, field := range []string{"namespace", "name", "uid"} {
				pod := testPod()
				switch field {
				case "namespace":
					pod.Namespace = v
				case "name":
					pod.Name = v
				case "uid":
					pod.UID = types.UID(v)
				}
				p, err = PodLogDir("/var/log/pods", pod)
				refused(t, "PodLogDir with a hostile "+field, p, err)
				p, err = ContainerLogDir("/var/log/pods", pod, "app")
				refused(t, "ContainerLogDir with a hostile "+field, p, err)
				_, err = SandboxConfig(pod, 0, SandboxOptions{PodLogsDir: "/var/log/pods"})
				if !errors.Is(err, podrules.ErrUnsafePathSegment) {
					t.Errorf("SandboxConfig with a hostile %s: %v, want ErrUnsafePathSegment", field, err)
				}
			}
			p, err = ContainerLogDir("/var/log/pods", testPod(), v)
			refused(t, "ContainerLogDir", p, err)
			p, err = ContainerLogPath(v, 0)
			refused(t, "ContainerLogPath", p, err)
			pod := testPod()
			c := &pod.Spec.Containers[0]
			c.Name = v
			_, err = ContainerConfig(pod, c, runtime.KindRegular, 0, containerOpts())
			if !errors.Is(err, podrules.ErrUnsafePathSegment) || !errors.Is(err, ErrCreateContainerConfig) {
				t.Errorf("ContainerConfig with a hostile container name: %v, want a CreateContainerConfigError", err)
			}
			root := t.TempDir()
			podDir := filepath.Join(root, "pods", "uid-1")
			p, err = NewTerminationLog(podDir, v)
			refused(t, "NewTerminationLog", p, err)
			if entries, _ := os.ReadDir(root); len(entries) != 0 {
				t.Errorf("NewTerminationLog created %v under the root", entries)
			}
		})
	}
}

// TestPodLogDirTooLong: valid identifiers whose log directory name would exceed a file name's length.
func TestPodLogDirTooLong(t *testing.T) {
	pod := testPod()
	pod.Namespace = strings.Repeat("n", 63)
	pod.Name = strings.Repeat("p", 200)
	p, err := PodLogDir("/var/log/pods", pod)
	refused(t, "PodLogDir", p, err)
}

func TestContainerLogPathRefusesANegativeRestartCount(t *testing.T) {
	if p, err := ContainerLogPath("app", -1); err == nil || p != "" {
		t.Errorf("ContainerLogPath(app, -1) = %q, %v; want an error", p, err)
	}
	if p, err := ContainerLogPath("app", 3); err != nil || p != "app/3.log" {
		t.Errorf("ContainerLogPath(app, 3) = %q, %v", p, err)
	}
}

// TestPathBuildersStayUnderTheirRoot: whatever they accept, the path builders name a path strictly below
// the root they were given.
func TestPathBuildersStayUnderTheirRoot(t *testing.T) {
	for _, v := range []string{"a", "...", "..a", "a..", ".hidden", "a b", "ü", strings.Repeat("x", 100)} {
		pod := testPod()
		pod.Namespace, pod.Name, pod.UID = "ns", v, types.UID(v)
		check := func(fn, root, p string, err error) {
			t.Helper()
			rel, rerr := filepath.Rel(root, p)
			if err != nil || rerr != nil || !filepath.IsLocal(rel) || rel == "." {
				t.Errorf("%s(%q) = %q, %v: want a path below %s", fn, v, p, err, root)
			}
		}
		p, err := PodDir("/root", types.UID(v))
		check("PodDir", "/root/pods", p, err)
		p, err = PodLogDir("/logs", pod)
		check("PodLogDir", "/logs", p, err)
		p, err = ContainerLogDir("/logs", pod, v)
		check("ContainerLogDir", "/logs", p, err)
		p, err = ContainerLogPath(v, 0)
		check("ContainerLogPath", ".", "./"+p, err)
	}
}

// FuzzPodPaths: whatever a pod's namespace, name and UID and a container's name are (from the API, a
// manifest or a runtime label), every path builder either refuses them or names a path exactly where the
// kubelet's layout puts it, below its root. CI: go test -run=^$ -fuzz=FuzzPodPaths -fuzztime=10s ./runtime/
func FuzzPodPaths(f *testing.F) {
	f.Add("default", "web", "1234-abcd", "app", 0)
	f.Add("..", "..", "..", "..", -1)
	f.Add("kube-system", "etcd", "../../..", "etcd", 3)
	for _, h := range podrulestest.HostileSegments() {
		f.Add(h.Value, "web", h.Value, h.Value, 1)
	}
	f.Fuzz(func(t *testing.T, ns, name, uid, container string, restarts int) {
		const root, logs = "/var/lib/nodelet", "/var/log/pods"
		below := func(fn, base, p string, depth int, err error) {
			if err != nil {
				negative := fn == "ContainerLogPath" && restarts < 0
				if p != "" || !errors.Is(err, podrules.ErrUnsafePathSegment) && !negative {
					t.Fatalf("%s = %q, %v", fn, p, err)
				}
				return
			}
			rel, rerr := filepath.Rel(base, p)
			if rerr != nil || !filepath.IsLocal(rel) || strings.Count(rel, "/") != depth-1 || strings.ContainsRune(p, 0) {
				t.Fatalf("%s(%q, %q, %q, %q) = %q: not %d segments below %s", fn, ns, name, uid, container, p, depth, base)
			}
		}
		pod := testPod()
		pod.Namespace, pod.Name, pod.UID = ns, name, types.UID(uid)
		p, err := PodDir(root, types.UID(uid))
		below("PodDir", root, p, 2, err)
		p, err = PodLogDir(logs, pod)
		below("PodLogDir", logs, p, 1, err)
		p, err = ContainerLogDir(logs, pod, container)
		below("ContainerLogDir", logs, p, 2, err)
		p, err = ContainerLogPath(container, restarts)
		if err == nil {
			p = filepath.Join(logs, p)
		}
		below("ContainerLogPath", logs, p, 2, err)
	})
}
