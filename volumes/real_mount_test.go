package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"
)

// mountInfo returns the mountinfo line of the mount at path, "" if none.
func mountInfo(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && unescapeOctal(f[4]) == path {
			return line
		}
	}
	return ""
}

// TestRealMounts runs the real mounter (root on Linux): a Memory emptyDir and a secret volume are tmpfs
// mounts (the emptyDir with its sizeLimit), a subPath is a bind mount, and TearDown unmounts them all.
func TestRealMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	root := t.TempDir()
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "size=16m"); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skip("mount not permitted here")
		}
		t.Fatal(err)
	}
	defer func() { _ = unix.Unmount(root, unix.MNT_DETACH) }()
	clk := clocktesting.NewFakeClock(testStart)
	objects := newFakeObjects(clk)
	objects.addSecret("ns", "s", map[string]string{"password": "hunter2"})
	m := &Manager{RootDir: root, Objects: objects, Clock: clk, NodeName: "node-1"}
	size := resource.MustParse("8Mi")
	pod := newPod(
		vol("mem", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}),
		vol("sec", secretSource("s", func(s *corev1.SecretVolumeSource) { s.DefaultMode = ptrTo[int32](0o400) })),
	)
	mustSetUp(t, m, pod)
	mustSetUp(t, m, pod) // idempotent: no second mount

	memDir := must(m.volumeDir(pod.UID, pluginEmptyDir, "mem"))
	secDir := must(m.volumeDir(pod.UID, pluginSecret, "sec"))
	for _, dir := range []string{memDir, secDir} {
		line := mountInfo(t, dir)
		if !strings.Contains(line, " - tmpfs ") {
			t.Errorf("%s is not a tmpfs: %q", dir, line)
		}
		if n := strings.Count(mountInfoAll(t), " "+dir+" "); n != 1 {
			t.Errorf("%s mounted %d times", dir, n)
		}
	}
	if line := mountInfo(t, memDir); !strings.Contains(line, "size=8192k") {
		t.Errorf("emptyDir tmpfs without its sizeLimit: %q", line)
	}
	if got := modeOf(t, filepath.Join(secDir, "password")).Perm(); got != 0o400 {
		t.Errorf("secret file mode = %v, want 0400", got)
	}

	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "sec", MountPath: "/etc/pw", SubPath: "password"}}
	mounts, err := m.Mounts(pod, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Mounts(pod, c, nil); err != nil { // a container restart: the bind is reused
		t.Fatal(err)
	}
	if n := strings.Count(mountInfoAll(t), " "+mounts[0].HostPath+" "); n != 1 {
		t.Errorf("subPath bound %d times", n)
	}
	if data, err := os.ReadFile(mounts[0].HostPath); err != nil || string(data) != "hunter2" || mountInfo(t, mounts[0].HostPath) == "" {
		t.Errorf("subPath bind %s: %q, %v, mounted=%t", mounts[0].HostPath, data, err, mountInfo(t, mounts[0].HostPath) != "")
	}

	for range 2 {
		if err := m.TearDown(context.Background(), pod.UID); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{memDir, secDir, mounts[0].HostPath} {
		if line := mountInfo(t, dir); line != "" {
			t.Errorf("%s still mounted: %q", dir, line)
		}
	}
	if exists(filepath.Join(must(m.podDir(pod.UID)), "volumes")) {
		t.Error("volumes dir not removed")
	}
}

func TestRealIsMountPoint(t *testing.T) {
	root := t.TempDir()
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, ""); err != nil {
		t.Skipf("cannot mount: %v", err)
	}
	defer func() { _ = unix.Unmount(root, unix.MNT_DETACH) }()
	sub := filepath.Join(root, "sub")
	mustMkdir(t, sub)
	for path, want := range map[string]bool{root: true, sub: false, filepath.Join(root, "missing"): false} {
		if got, err := (realMounter{}).IsMountPoint(path); err != nil || got != want {
			t.Errorf("IsMountPoint(%s) = %t, %v; want %t", path, got, err, want)
		}
	}
	under, err := (realMounter{}).MountPointsUnder(root)
	if err != nil || len(under) != 1 || under[0] != root {
		t.Errorf("MountPointsUnder = %v, %v", under, err)
	}
}

func mountInfoAll(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestParseMountInfo(t *testing.T) {
	data := []byte("22 1 0:21 / / rw - ext4 /dev/sda1 rw\n" +
		"36 22 0:33 / /var/lib/with\\040space rw,relatime - tmpfs tmpfs rw,size=1024k\n")
	got, err := parseMountInfo(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1] != "/var/lib/with space" {
		t.Errorf("mount points = %q", got)
	}
	if _, err := parseMountInfo([]byte("bad line\n")); err == nil {
		t.Error("malformed line accepted")
	}
}
