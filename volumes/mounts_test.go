package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/podconfig"
)

func TestMounts(t *testing.T) {
	bidi := corev1.MountPropagationBidirectional
	h2c := corev1.MountPropagationHostToContainer
	none := corev1.MountPropagationNone
	ifPossible := corev1.RecursiveReadOnlyIfPossible
	enabled := corev1.RecursiveReadOnlyEnabled
	tests := []struct {
		name       string
		vm         corev1.VolumeMount
		privileged bool
		rroRuntime bool
		want       func(m *Manager) *runtimeapi.Mount
		wantErr    string
	}{
		{
			name: "emptyDir read-write",
			vm:   corev1.VolumeMount{Name: "scratch", MountPath: "/data"},
			want: func(m *Manager) *runtimeapi.Mount {
				return &runtimeapi.Mount{ContainerPath: "/data", HostPath: must(m.volumeDir("uid-1", pluginEmptyDir, "scratch"))}
			},
		},
		{
			name: "configMap always read-only",
			vm:   corev1.VolumeMount{Name: "cfg", MountPath: "/etc/cfg"},
			want: func(m *Manager) *runtimeapi.Mount {
				return &runtimeapi.Mount{ContainerPath: "/etc/cfg", HostPath: must(m.volumeDir("uid-1", pluginConfigMap, "cfg")), Readonly: true}
			},
		},
		{
			name: "hostPath readOnly, HostToContainer",
			vm:   corev1.VolumeMount{Name: "host", MountPath: "/host", ReadOnly: true, MountPropagation: &h2c},
			want: func(*Manager) *runtimeapi.Mount {
				return &runtimeapi.Mount{ContainerPath: "/host", HostPath: "/var/log", Readonly: true,
					Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER}
			},
		},
		{
			name: "None is private", vm: corev1.VolumeMount{Name: "host", MountPath: "/host", MountPropagation: &none},
			want: func(*Manager) *runtimeapi.Mount {
				return &runtimeapi.Mount{ContainerPath: "/host", HostPath: "/var/log", Propagation: runtimeapi.MountPropagation_PROPAGATION_PRIVATE}
			},
		},
		{
			name: "Bidirectional when privileged", privileged: true,
			vm: corev1.VolumeMount{Name: "host", MountPath: "/host", MountPropagation: &bidi},
			want: func(*Manager) *runtimeapi.Mount {
				return &runtimeapi.Mount{ContainerPath: "/host", HostPath: "/var/log", Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL}
			},
		},
		{
			name:    "Bidirectional unprivileged",
			vm:      corev1.VolumeMount{Name: "host", MountPath: "/host", MountPropagation: &bidi},
			wantErr: "only allowed in privileged containers",
		},
		{
			name: "recursive read-only if possible, supported", rroRuntime: true,
			vm: corev1.VolumeMount{Name: "host", MountPath: "/host", ReadOnly: true, RecursiveReadOnly: &ifPossible},
			want: func(*Manager) *runtimeapi.Mount {
				return &runtimeapi.Mount{ContainerPath: "/host", HostPath: "/var/log", Readonly: true, RecursiveReadOnly: true}
			},
		},
		{
			name: "recursive read-only if possible, unsupported",
			vm:   corev1.VolumeMount{Name: "host", MountPath: "/host", ReadOnly: true, RecursiveReadOnly: &ifPossible},
			want: func(*Manager) *runtimeapi.Mount {
				return &runtimeapi.Mount{ContainerPath: "/host", HostPath: "/var/log", Readonly: true}
			},
		},
		{
			name:    "recursive read-only enabled, unsupported",
			vm:      corev1.VolumeMount{Name: "host", MountPath: "/host", ReadOnly: true, RecursiveReadOnly: &enabled},
			wantErr: "not supported by the runtime",
		},
		{
			name: "recursive read-only needs readOnly", rroRuntime: true,
			vm:      corev1.VolumeMount{Name: "host", MountPath: "/host", RecursiveReadOnly: &enabled},
			wantErr: "it is not read-only",
		},
		{name: "unknown volume", vm: corev1.VolumeMount{Name: "nope", MountPath: "/x"}, wantErr: `cannot find volume "nope" to mount into container "c"`},
		{name: "absolute subPath", vm: corev1.VolumeMount{Name: "scratch", MountPath: "/x", SubPath: "/etc"}, wantErr: "must not be an absolute path"},
		{name: "subPath with ..", vm: corev1.VolumeMount{Name: "scratch", MountPath: "/x", SubPath: "a/../../etc"}, wantErr: "must not contain '..'"},
		{name: "subPathExpr missing var", vm: corev1.VolumeMount{Name: "scratch", MountPath: "/x", SubPathExpr: "$(NOPE)/$(ALSO)"}, wantErr: "missing value for ALSO, NOPE"},
		{name: "subPathExpr escaping", vm: corev1.VolumeMount{Name: "scratch", MountPath: "/x", SubPathExpr: "$(POD)/../x"}, wantErr: "must not contain '..'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			env.m.RecursiveReadOnlyMounts = tt.rroRuntime
			pod := mountsPod()
			c := &pod.Spec.Containers[0]
			c.VolumeMounts = []corev1.VolumeMount{tt.vm}
			c.SecurityContext = &corev1.SecurityContext{Privileged: &tt.privileged}
			mustSetUp(t, env.m, pod)
			got, err := env.m.Mounts(pod, c, map[string]string{"POD": "web"})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.want(env.m); len(got) != 1 || got[0].String() != want.String() {
				t.Errorf("mounts = %v, want %v", got, want)
			}
		})
	}
}

// HostPath is where a volume is on the host (an emptyDir in the pod's directory, a hostPath's own path): what
// a fileKeyRef reads from; a volume the pod does not have is an error.
func TestHostPath(t *testing.T) {
	env := newTestEnv(t)
	pod := mountsPod()
	mustSetUp(t, env.m, pod)
	if got, err := env.m.HostPath(pod, "scratch"); err != nil || got != must(env.m.volumeDir("uid-1", pluginEmptyDir, "scratch")) {
		t.Errorf("emptyDir at %q (%v)", got, err)
	}
	if got, err := env.m.HostPath(pod, "host"); err != nil || got != "/var/log" {
		t.Errorf("hostPath at %q (%v)", got, err)
	}
	if _, err := env.m.HostPath(pod, "nope"); err == nil {
		t.Error("a volume the pod does not have has a path")
	}
}

func mountsPod() *corev1.Pod {
	return newPod(
		vol("scratch", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
		vol("cfg", cmSource("cfg", func(s *corev1.ConfigMapVolumeSource) { s.Optional = ptrTo(true) })),
		vol("host", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}),
	)
}

// TestSubPath: the subPath (or expanded subPathExpr) is created in the volume if missing, opened
// safely and bind-mounted under volume-subpaths, which is what the container mounts.
func TestSubPath(t *testing.T) {
	tests := []struct {
		name       string
		vm         corev1.VolumeMount
		prepare    func(t *testing.T, volDir string)
		wantSource string // relative to the volume dir
		wantDir    bool
		created    bool
	}{
		{name: "existing file", vm: corev1.VolumeMount{SubPath: "conf/app.conf"}, prepare: writeIn("conf/app.conf"), wantSource: "conf/app.conf"},
		{name: "missing dir is created", vm: corev1.VolumeMount{SubPath: "logs/web"}, wantSource: "logs/web", wantDir: true, created: true},
		{name: "subPathExpr", vm: corev1.VolumeMount{SubPathExpr: "pods/$(POD_NAME)"}, wantSource: "pods/web-0", wantDir: true, created: true},
		{name: "symlink inside the volume", vm: corev1.VolumeMount{SubPath: "current"}, prepare: linkIn("current", "v2", true), wantSource: "v2", wantDir: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			pod := mountsPod()
			mustSetUp(t, env.m, pod)
			volDir := must(env.m.volumeDir(pod.UID, pluginEmptyDir, "scratch"))
			if tt.prepare != nil {
				tt.prepare(t, volDir)
			}
			c := &pod.Spec.Containers[0]
			vm := tt.vm
			vm.Name, vm.MountPath = "scratch", "/mnt"
			c.VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}, vm}
			mounts, err := env.m.Mounts(pod, c, map[string]string{"POD_NAME": "web-0"})
			if err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(env.m.RootDir, "pods/uid-1/volume-subpaths/scratch/c/1")
			if mounts[1].HostPath != target {
				t.Errorf("host path = %s, want %s", mounts[1].HostPath, target)
			}
			wantCall := "bind " + filepath.Join(volDir, tt.wantSource) + " " + target + " ro=false"
			if calls := env.mounter.callsWith("bind"); len(calls) != 1 || calls[0] != wantCall {
				t.Errorf("bind calls = %v, want [%s]", calls, wantCall)
			}
			if info, err := os.Stat(target); err != nil || info.IsDir() != tt.wantDir {
				t.Errorf("bind target: %v, %v (want dir %t)", info, err, tt.wantDir)
			}
			if tt.created && modeOf(t, filepath.Join(volDir, tt.wantSource)).Perm() != 0o777 {
				t.Errorf("created subPath mode = %v, want the volume's 0777", modeOf(t, filepath.Join(volDir, tt.wantSource)))
			}
		})
	}
}

// TestSubPathEscapes: a subPath that leaves the volume through a symlink is refused, with a message
// that says nothing about the host.
func TestSubPathEscapes(t *testing.T) {
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "shadow"))
	tests := []struct {
		name    string
		subPath string
		prepare func(t *testing.T, volDir string)
	}{
		{name: "symlink to outside", subPath: "evil", prepare: linkIn("evil", outside, false)},
		{name: "symlink to outside file", subPath: "evil/shadow", prepare: linkIn("evil", outside, false)},
		{name: "relative symlink up", subPath: "up/x", prepare: linkIn("up", "../../../../..", false)},
		{name: "create through symlink", subPath: "evil/newdir", prepare: linkIn("evil", outside, false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			pod := mountsPod()
			mustSetUp(t, env.m, pod)
			tt.prepare(t, must(env.m.volumeDir(pod.UID, pluginEmptyDir, "scratch")))
			c := &pod.Spec.Containers[0]
			c.VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/mnt", SubPath: tt.subPath}}
			_, err := env.m.Mounts(pod, c, nil)
			if err == nil || !strings.Contains(err.Error(), `subPath`) || strings.Contains(err.Error(), outside) {
				t.Errorf("err = %v, want a subPath error not naming host paths", err)
			}
			if calls := env.mounter.callsWith("bind"); len(calls) != 0 {
				t.Errorf("bind-mounted %v", calls)
			}
			if exists(filepath.Join(outside, "newdir")) {
				t.Error("created a directory outside the volume")
			}
		})
	}
}

// TestSubPathOfConfigMap: a subPath of an atomically written volume binds the current version of the
// file; after an update, preparing the mount again (a container restart) binds the new one.
func TestSubPathOfConfigMap(t *testing.T) {
	env := newTestEnv(t)
	env.objects.addConfigMap("ns", "cfg", map[string]string{"app.conf": "v1"})
	pod := mountsPod()
	pod.Spec.Volumes[1] = vol("cfg", cmSource("cfg"))
	mustSetUp(t, env.m, pod)
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/app.conf", SubPath: "app.conf"}}
	mounts, err := env.m.Mounts(pod, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !mounts[0].Readonly {
		t.Error("configMap subPath mount not read-only")
	}
	env.objects.addConfigMap("ns", "cfg", map[string]string{"app.conf": "v2"})
	mustSetUp(t, env.m, pod)
	if _, err := env.m.Mounts(pod, c, nil); err != nil {
		t.Fatal(err)
	}
	binds := env.mounter.callsWith("bind")
	if len(binds) != 2 || binds[0] == binds[1] || env.mounter.callsWith("unmount") == nil {
		t.Errorf("binds = %v, unmounts = %v; want the stale bind replaced", binds, env.mounter.callsWith("unmount"))
	}
}

func writeIn(rel string) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		mustMkdir(t, filepath.Dir(filepath.Join(dir, rel)))
		mustWrite(t, filepath.Join(dir, rel))
	}
}

func linkIn(name, target string, mkTarget bool) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		if mkTarget {
			mustMkdir(t, filepath.Join(dir, target))
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "x", "B": "y"}
	tests := map[string]string{
		"$(A)/$(B)": "x/y",
		"$$(A)":     "$(A)",
		"a$b":       "a$b",
		"$(A":       "$(A",
		"end$":      "end$",
	}
	for in, want := range tests {
		if got := podconfig.Expand(in, func(k string) string { return env[k] }); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}
