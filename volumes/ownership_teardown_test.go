package volumes

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func gidOf(t *testing.T, path string) uint32 {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Gid
}

// TestFSGroupOwnership: with fsGroup, emptyDir and atomically written volumes belong to the group,
// with g+rw (g+r for read-only volumes) and setgid directories.
func TestFSGroupOwnership(t *testing.T) {
	env := newTestEnv(t)
	env.objects.addConfigMap("ns", "cfg", map[string]string{"k": "v"})
	env.objects.addSecret("ns", "s", map[string]string{"k": "v"})
	pod := newPod(
		vol("scratch", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
		vol("cfg", cmSource("cfg", func(s *corev1.ConfigMapVolumeSource) { s.DefaultMode = ptrTo[int32](0o400) })),
		vol("sec", secretSource("s")),
		vol("info", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{fieldItem("name", "metadata.name")}}}),
	)
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptrTo[int64](4242)}
	mustSetUp(t, env.m, pod)
	checks := []struct {
		path string
		mode os.FileMode
	}{
		{must(env.m.volumeDir(pod.UID, pluginEmptyDir, "scratch")), os.ModeDir | os.ModeSetgid | 0o777},
		{filepath.Join(must(env.m.volumeDir(pod.UID, pluginConfigMap, "cfg")), "k"), 0o440},
		{filepath.Join(must(env.m.volumeDir(pod.UID, pluginSecret, "sec")), "k"), 0o644},
		{filepath.Join(must(env.m.volumeDir(pod.UID, pluginDownwardAPI, "info")), "name"), 0o644},
		{must(env.m.volumeDir(pod.UID, pluginConfigMap, "cfg")), os.ModeDir | os.ModeSetgid | 0o777},
	}
	for _, c := range checks {
		if got := modeOf(t, c.path); got != c.mode {
			t.Errorf("%s mode = %v, want %v", c.path, got, c.mode)
		}
		if gid := gidOf(t, c.path); gid != 4242 {
			t.Errorf("%s gid = %d, want 4242", c.path, gid)
		}
	}
}

func TestFSGroupChangePolicy(t *testing.T) {
	tests := []struct {
		name     string
		policy   corev1.PodFSGroupChangePolicy
		rootOK   bool
		wantFile uint32 // gid of the file inside afterwards
	}{
		{name: "Always changes everything", policy: corev1.FSGroupChangeAlways, rootOK: true, wantFile: 4242},
		{name: "OnRootMismatch, root mismatched", policy: corev1.FSGroupChangeOnRootMismatch, wantFile: 4242},
		{name: "OnRootMismatch, root matches: skipped", policy: corev1.FSGroupChangeOnRootMismatch, rootOK: true, wantFile: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "f")
			mustWrite(t, file)
			if tt.rootOK {
				if err := os.Chown(dir, -1, 4242); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, os.ModeSetgid|0o770); err != nil {
					t.Fatal(err)
				}
			}
			policy := tt.policy
			if err := setVolumeOwnership(dir, ptrTo[int64](4242), &policy, false); err != nil {
				t.Fatal(err)
			}
			if gid := gidOf(t, file); gid != tt.wantFile {
				t.Errorf("file gid = %d, want %d", gid, tt.wantFile)
			}
		})
	}
}

// TestTearDown unmounts the tmpfs volumes and subPath binds, removes the volume directories and
// forgets the pod; a second call does nothing and succeeds.
func TestTearDown(t *testing.T) {
	env := newTestEnv(t)
	env.objects.addSecret("ns", "s", map[string]string{"k": "v"})
	pod := newPod(
		vol("mem", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}),
		vol("disk", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
		vol("sec", secretSource("s")),
		kubeAPIAccessWithoutCA(),
	)
	mustSetUp(t, env.m, pod)
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "disk", MountPath: "/logs", SubPath: "logs"}}
	if _, err := env.m.Mounts(pod, c, nil); err != nil {
		t.Fatal(err)
	}
	if len(env.mounter.mounted) != 4 {
		t.Fatalf("mounted = %v, want 3 tmpfs and 1 bind", env.mounter.mounted)
	}
	for range 2 {
		if err := env.m.TearDown(context.Background(), pod.UID); err != nil {
			t.Fatal(err)
		}
	}
	if len(env.mounter.mounted) != 0 {
		t.Errorf("still mounted: %v", env.mounter.mounted)
	}
	if got := len(env.mounter.callsWith("unmount")); got != 4 {
		t.Errorf("unmounts = %d, want 4", got)
	}
	podDir := must(env.m.podDir(pod.UID))
	for _, d := range []string{"volumes", "volume-subpaths"} {
		if exists(filepath.Join(podDir, d)) {
			t.Errorf("%s not removed", d)
		}
	}
	if env.m.Ready(pod.UID) {
		t.Error("Ready after TearDown")
	}
}

// TestTearDownKeepsWhatIsStillMounted: if an unmount fails nothing is removed (a bind mount could lead
// into a hostPath).
func TestTearDownKeepsWhatIsStillMounted(t *testing.T) {
	env := newTestEnv(t)
	pod := newPod(vol("mem", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}))
	mustSetUp(t, env.m, pod)
	dir := must(env.m.volumeDir(pod.UID, pluginEmptyDir, "mem"))
	mustWrite(t, filepath.Join(dir, "data"))
	env.mounter.failOn = "unmount"
	if err := env.m.TearDown(context.Background(), pod.UID); err == nil {
		t.Fatal("TearDown succeeded with a failing unmount")
	}
	if !exists(filepath.Join(dir, "data")) {
		t.Error("removed the content of a volume still mounted")
	}
	env.mounter.failOn = ""
	if err := env.m.TearDown(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
}

func kubeAPIAccessWithoutCA() corev1.Volume {
	return vol("token", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{tokenProjection("token", "", nil)},
	}})
}
