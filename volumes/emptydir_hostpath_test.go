package volumes

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestEmptyDir(t *testing.T) {
	gi := resource.MustParse("1Gi")
	small := resource.MustParse("64Mi")
	tests := []struct {
		name      string
		src       corev1.EmptyDirVolumeSource
		alloc     corev1.ResourceList
		limits    corev1.ResourceList
		wantTmpfs string // "" = on disk
		wantMode  os.FileMode
	}{
		{name: "disk", wantMode: 0o777},
		{name: "disk with mode", src: corev1.EmptyDirVolumeSource{Mode: ptrTo[int32](0o750)}, wantMode: 0o750},
		{name: "memory, no limits", src: corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}, wantTmpfs: "size=0"},
		{
			name: "memory with sizeLimit", src: corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &small},
			wantTmpfs: "size=67108864",
		},
		{
			name: "memory bounded by allocatable", src: corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory},
			alloc: corev1.ResourceList{corev1.ResourceMemory: gi}, wantTmpfs: "size=1073741824",
		},
		{
			name: "memory bounded by the pod's limit", src: corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory},
			alloc: corev1.ResourceList{corev1.ResourceMemory: gi}, limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			wantTmpfs: "size=134217728",
		},
		{
			name: "sizeLimit above the pod's limit is ignored", src: corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &gi},
			limits: corev1.ResourceList{corev1.ResourceMemory: small}, wantTmpfs: "size=67108864",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			env.m.NodeAllocatable = func() corev1.ResourceList { return tt.alloc }
			src := tt.src
			pod := newPod(vol("scratch", corev1.VolumeSource{EmptyDir: &src}))
			pod.Spec.Containers[0].Resources.Limits = tt.limits
			mustSetUp(t, env.m, pod)
			dir := must(env.m.volumeDir(pod.UID, pluginEmptyDir, "scratch"))
			if !strings.HasSuffix(dir, "/pods/uid-1/volumes/kubernetes.io~empty-dir/scratch") {
				t.Errorf("dir = %s", dir)
			}
			calls := env.mounter.callsWith("tmpfs")
			if tt.wantTmpfs == "" {
				if len(calls) != 0 {
					t.Errorf("disk emptyDir mounted %v", calls)
				}
				if got := modeOf(t, dir).Perm(); got != tt.wantMode {
					t.Errorf("mode = %v, want %v", got, tt.wantMode)
				}
				return
			}
			if want := "tmpfs " + dir + " " + tt.wantTmpfs; len(calls) != 1 || calls[0] != want {
				t.Errorf("mounts = %v, want [%s]", calls, want)
			}
		})
	}
}

// TestEmptyDirSurvivesSyncs: the data of an emptyDir stays across syncs (containers restarting) and a
// directory the containers changed is left as they made it.
func TestEmptyDirSurvivesSyncs(t *testing.T) {
	env := newTestEnv(t)
	pod := newPod(vol("scratch", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}))
	mustSetUp(t, env.m, pod)
	dir := must(env.m.volumeDir(pod.UID, pluginEmptyDir, "scratch"))
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	mustSetUp(t, env.m, pod)
	if data, err := os.ReadFile(filepath.Join(dir, "data")); err != nil || string(data) != "kept" {
		t.Errorf("data = %q, %v after a second sync", data, err)
	}
	if got := modeOf(t, dir).Perm(); got != 0o700 {
		t.Errorf("mode reset to %v", got)
	}
}

func TestEmptyDirHugePagesUnsupported(t *testing.T) {
	env := newTestEnv(t)
	pod := newPod(vol("hp", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumHugePages}}))
	errs := env.m.SetUp(context.Background(), pod)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `emptyDir medium "HugePages" is not supported`) {
		t.Errorf("errors = %v", errs)
	}
}

func TestHostPathTypes(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "dir")
	file := filepath.Join(base, "file")
	sock := filepath.Join(base, "sock")
	mustMkdir(t, dir)
	mustWrite(t, file)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	block := filepath.Join(base, "block")
	if err := unix.Mknod(block, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 200))); err != nil {
		t.Logf("mknod block device: %v (block device cases check the error only)", err)
	}
	missing := filepath.Join(base, "missing")
	tests := []struct {
		name    string
		path    string
		typ     corev1.HostPathType
		wantErr string
		check   func(t *testing.T, path string)
	}{
		{name: "unset accepts anything", path: missing, typ: corev1.HostPathUnset},
		{name: "directory", path: dir, typ: corev1.HostPathDirectory},
		{name: "directory is a file", path: file, typ: corev1.HostPathDirectory, wantErr: "hostPath type check failed: " + file + " is not a directory, it's a File"},
		{name: "directory missing", path: missing, typ: corev1.HostPathDirectory, wantErr: "hostPath type check failed, " + missing + " is not a directory, unable to determine its type: path \"" + missing + "\" does not exist"},
		{name: "directoryOrCreate creates 0755", path: filepath.Join(base, "new/deep"), typ: corev1.HostPathDirectoryOrCreate, check: wantMode(os.ModeDir | 0o755)},
		{name: "directoryOrCreate on a file", path: file, typ: corev1.HostPathDirectoryOrCreate, wantErr: "is not a directory, it's a File"},
		{name: "file", path: file, typ: corev1.HostPathFile},
		{name: "file is a directory", path: dir, typ: corev1.HostPathFile, wantErr: "hostPath type check failed: " + dir + " is not a file, it's a Directory"},
		{name: "fileOrCreate creates 0644", path: filepath.Join(base, "created"), typ: corev1.HostPathFileOrCreate, check: wantMode(0o644)},
		{name: "fileOrCreate without parent", path: filepath.Join(base, "nodir/f"), typ: corev1.HostPathFileOrCreate, wantErr: "no such file or directory"},
		{name: "fileOrCreate on a directory", path: dir, typ: corev1.HostPathFileOrCreate, wantErr: "is not a file, it's a Directory"},
		{name: "socket", path: sock, typ: corev1.HostPathSocket},
		{name: "socket is a file", path: file, typ: corev1.HostPathSocket, wantErr: "is not a socket file, it's a File"},
		{name: "char device", path: "/dev/null", typ: corev1.HostPathCharDev},
		{name: "char device is a dir", path: dir, typ: corev1.HostPathCharDev, wantErr: "is not a character device, it's a Directory"},
		{name: "block device is a char device", path: "/dev/null", typ: corev1.HostPathBlockDev, wantErr: "/dev/null is not a block device, it's a CharDevice"},
		{name: "invalid type", path: dir, typ: "Weird", wantErr: "Weird is an invalid volume type"},
		{name: "backsteps", path: "/var/../etc", typ: corev1.HostPathUnset, wantErr: "invalid HostPath `/var/../etc`: must not contain '..'"},
	}
	if exists(block) {
		tests = append(tests, struct {
			name    string
			path    string
			typ     corev1.HostPathType
			wantErr string
			check   func(t *testing.T, path string)
		}{name: "block device", path: block, typ: corev1.HostPathBlockDev})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			typ := tt.typ
			pod := newPod(vol("h", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: tt.path, Type: &typ}}))
			errs := env.m.SetUp(context.Background(), pod)
			if tt.wantErr == "" && len(errs) > 0 {
				t.Fatalf("errors = %v", errs)
			}
			if tt.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.wantErr)) {
				t.Fatalf("errors = %v, want one containing %q", errs, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, tt.path)
			}
		})
	}
}

func wantMode(mode os.FileMode) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		t.Helper()
		if got := modeOf(t, path); got != mode {
			t.Errorf("%s mode = %v, want %v", path, got, mode)
		}
	}
}

func mustMkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}
