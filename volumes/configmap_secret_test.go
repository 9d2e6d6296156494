package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func cmSource(name string, mut ...func(*corev1.ConfigMapVolumeSource)) corev1.VolumeSource {
	src := &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}
	for _, f := range mut {
		f(src)
	}
	return corev1.VolumeSource{ConfigMap: src}
}

func secretSource(name string, mut ...func(*corev1.SecretVolumeSource)) corev1.VolumeSource {
	src := &corev1.SecretVolumeSource{SecretName: name}
	for _, f := range mut {
		f(src)
	}
	return corev1.VolumeSource{Secret: src}
}

func TestConfigMapVolume(t *testing.T) {
	tests := []struct {
		name      string
		src       corev1.VolumeSource
		exists    bool
		wantFiles map[string]string
		wantModes map[string]uint32
		wantErr   string
	}{
		{
			name: "every key with the default mode", src: cmSource("cfg"), exists: true,
			wantFiles: map[string]string{"a": "A", "b": "B"},
			wantModes: map[string]uint32{"a": 0o644, "b": 0o644},
		},
		{
			name: "defaultMode", src: cmSource("cfg", func(s *corev1.ConfigMapVolumeSource) { s.DefaultMode = ptrTo[int32](0o400) }), exists: true,
			wantFiles: map[string]string{"a": "A", "b": "B"},
			wantModes: map[string]uint32{"a": 0o400, "b": 0o400},
		},
		{
			name: "items with path and mode", exists: true,
			src: cmSource("cfg", func(s *corev1.ConfigMapVolumeSource) {
				s.Items = []corev1.KeyToPath{{Key: "a", Path: "dir/a.conf", Mode: ptrTo[int32](0o600)}, {Key: "b", Path: "b.conf"}}
			}),
			wantFiles: map[string]string{"dir/a.conf": "A", "b.conf": "B"},
			wantModes: map[string]uint32{"dir/a.conf": 0o600, "b.conf": 0o644},
		},
		{
			name: "missing key in items", exists: true,
			src:     cmSource("cfg", func(s *corev1.ConfigMapVolumeSource) { s.Items = []corev1.KeyToPath{{Key: "nope", Path: "x"}} }),
			wantErr: `MountVolume.SetUp failed for volume "v" : configmap references non-existent config key: nope`,
		},
		{
			name: "missing key in items, optional", exists: true,
			src: cmSource("cfg", func(s *corev1.ConfigMapVolumeSource) {
				s.Items = []corev1.KeyToPath{{Key: "nope", Path: "x"}, {Key: "a", Path: "a"}}
				s.Optional = ptrTo(true)
			}),
			wantFiles: map[string]string{"a": "A"},
		},
		{
			name: "missing configmap", src: cmSource("cfg"),
			wantErr: `MountVolume.SetUp failed for volume "v" : configmap "cfg" not found`,
		},
		{
			name: "missing optional configmap is an empty volume", wantFiles: map[string]string{},
			src: cmSource("cfg", func(s *corev1.ConfigMapVolumeSource) { s.Optional = ptrTo(true) }),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			if tt.exists {
				env.objects.addConfigMap("ns", "cfg", map[string]string{"a": "A", "b": "B"})
			}
			pod := newPod(vol("v", tt.src))
			errs := env.m.SetUp(context.Background(), pod)
			if tt.wantErr != "" {
				if len(errs) != 1 || errs[0].Error() != tt.wantErr {
					t.Fatalf("errors = %v, want %q", errs, tt.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			dir := must(env.m.volumeDir(pod.UID, pluginConfigMap, "v"))
			if got := readVolume(t, dir); !reflect.DeepEqual(got, tt.wantFiles) {
				t.Errorf("files = %v, want %v", got, tt.wantFiles)
			}
			for f, mode := range tt.wantModes {
				if got := modeOf(t, filepath.Join(dir, f)).Perm(); uint32(got) != mode {
					t.Errorf("%s mode = %o, want %o", f, got, mode)
				}
			}
			if calls := env.mounter.callsWith("tmpfs"); len(calls) != 0 {
				t.Errorf("configMap volume mounted a tmpfs: %v", calls)
			}
		})
	}
}

func TestConfigMapBinaryData(t *testing.T) {
	env := newTestEnv(t)
	env.objects.addConfigMap("ns", "cfg", map[string]string{"text": "t"})
	env.objects.configMaps["ns/cfg"].BinaryData = map[string][]byte{"bin": {0, 1, 2}}
	pod := newPod(vol("v", cmSource("cfg")))
	mustSetUp(t, env.m, pod)
	got := readVolume(t, must(env.m.volumeDir(pod.UID, pluginConfigMap, "v")))
	if want := map[string]string{"text": "t", "bin": "\x00\x01\x02"}; !reflect.DeepEqual(got, want) {
		t.Errorf("files = %q, want %q", got, want)
	}
}

// TestConfigMapUpdate: a sync after the ConfigMap changed re-writes the volume: changed keys get the
// new content, deleted keys disappear, new keys appear.
func TestConfigMapUpdate(t *testing.T) {
	env := newTestEnv(t)
	env.objects.addConfigMap("ns", "cfg", map[string]string{"keep": "1", "change": "old", "drop": "x"})
	pod := newPod(vol("v", cmSource("cfg")))
	mustSetUp(t, env.m, pod)
	dir := must(env.m.volumeDir(pod.UID, pluginConfigMap, "v"))

	env.objects.addConfigMap("ns", "cfg", map[string]string{"keep": "1", "change": "new", "add": "y"})
	mustSetUp(t, env.m, pod)
	want := map[string]string{"keep": "1", "change": "new", "add": "y"}
	if got := readVolume(t, dir); !reflect.DeepEqual(got, want) {
		t.Errorf("files after update = %v, want %v", got, want)
	}
	if exists(filepath.Join(dir, "drop")) {
		t.Error("deleted key still visible")
	}
}

func TestSecretVolume(t *testing.T) {
	tests := []struct {
		name      string
		src       corev1.VolumeSource
		exists    bool
		wantFiles map[string]string
		wantModes map[string]uint32
		wantErr   string
	}{
		{
			name: "every key", src: secretSource("s"), exists: true,
			wantFiles: map[string]string{"user": "admin", "pass": "hunter2"},
			wantModes: map[string]uint32{"user": 0o644, "pass": 0o644},
		},
		{
			name: "items and modes", exists: true,
			src: secretSource("s", func(s *corev1.SecretVolumeSource) {
				s.DefaultMode = ptrTo[int32](0o440)
				s.Items = []corev1.KeyToPath{{Key: "pass", Path: "creds/pass", Mode: ptrTo[int32](0o400)}, {Key: "user", Path: "user"}}
			}),
			wantFiles: map[string]string{"creds/pass": "hunter2", "user": "admin"},
			wantModes: map[string]uint32{"creds/pass": 0o400, "user": 0o440},
		},
		{
			name: "missing key", exists: true,
			src:     secretSource("s", func(s *corev1.SecretVolumeSource) { s.Items = []corev1.KeyToPath{{Key: "nope", Path: "x"}} }),
			wantErr: `MountVolume.SetUp failed for volume "v" : references non-existent secret key: nope`,
		},
		{
			name: "missing secret", src: secretSource("s"),
			wantErr: `MountVolume.SetUp failed for volume "v" : secret "s" not found`,
		},
		{
			name: "missing optional secret", wantFiles: map[string]string{},
			src: secretSource("s", func(s *corev1.SecretVolumeSource) { s.Optional = ptrTo(true) }),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			if tt.exists {
				env.objects.addSecret("ns", "s", map[string]string{"user": "admin", "pass": "hunter2"})
			}
			pod := newPod(vol("v", tt.src))
			errs := env.m.SetUp(context.Background(), pod)
			if tt.wantErr != "" {
				if len(errs) != 1 || errs[0].Error() != tt.wantErr {
					t.Fatalf("errors = %v, want %q", errs, tt.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			dir := must(env.m.volumeDir(pod.UID, pluginSecret, "v"))
			if got := readVolume(t, dir); !reflect.DeepEqual(got, tt.wantFiles) {
				t.Errorf("files = %v, want %v", got, tt.wantFiles)
			}
			for f, mode := range tt.wantModes {
				if got := modeOf(t, filepath.Join(dir, f)).Perm(); uint32(got) != mode {
					t.Errorf("%s mode = %o, want %o", f, got, mode)
				}
			}
			if calls := env.mounter.callsWith("tmpfs " + dir); len(calls) != 1 {
				t.Errorf("tmpfs mounts of the secret volume = %v, want one", calls)
			}
		})
	}
}

// TestSetUpIsIdempotent: syncing again mounts nothing more and re-writes nothing unchanged.
func TestSetUpIsIdempotent(t *testing.T) {
	env := newTestEnv(t)
	env.objects.addSecret("ns", "s", map[string]string{"k": "v"})
	pod := newPod(vol("s", secretSource("s")), vol("e", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}))
	mustSetUp(t, env.m, pod)
	dir := must(env.m.volumeDir(pod.UID, pluginSecret, "s"))
	ts, _ := readlink(dir)
	for range 3 {
		mustSetUp(t, env.m, pod)
	}
	if calls := env.mounter.callsWith("tmpfs"); len(calls) != 2 {
		t.Errorf("tmpfs mounts = %v, want 2 (one per volume)", calls)
	}
	if now, _ := readlink(dir); now != ts {
		t.Errorf("unchanged secret re-written: ..data %s -> %s", ts, now)
	}
}

// TestSetUpReportsEachFailedVolume: every failing volume gets its own VolumeError and the others are
// still set up; Ready only once all succeeded.
func TestSetUpReportsEachFailedVolume(t *testing.T) {
	env := newTestEnv(t)
	env.objects.addConfigMap("ns", "good", map[string]string{"k": "v"})
	pod := newPod(
		vol("bad-cm", cmSource("missing")),
		vol("good", cmSource("good")),
		vol("nfs", corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/"}}),
		vol("scratch", corev1.VolumeSource{}),
	)
	errs := env.m.SetUp(context.Background(), pod)
	want := []string{
		`MountVolume.SetUp failed for volume "bad-cm" : configmap "missing" not found`,
		`MountVolume.SetUp failed for volume "nfs" : unsupported volume type "nfs"`,
	}
	if len(errs) != len(want) {
		t.Fatalf("errors = %v, want %v", errs, want)
	}
	for i, err := range errs {
		var ve *VolumeError
		if !errors.As(err, &ve) || err.Error() != want[i] {
			t.Errorf("error %d = %v, want VolumeError %q", i, err, want[i])
		}
	}
	if !errors.Is(errs[1], ErrUnsupportedVolume) {
		t.Errorf("nfs error does not wrap ErrUnsupportedVolume")
	}
	if got := readVolume(t, must(env.m.volumeDir(pod.UID, pluginConfigMap, "good"))); got["k"] != "v" {
		t.Errorf("good volume not set up: %v", got)
	}
	if !exists(must(env.m.volumeDir(pod.UID, pluginEmptyDir, "scratch"))) {
		t.Error("a volume without a source is not an emptyDir")
	}
	if env.m.Ready(pod.UID) {
		t.Error("Ready with failed volumes")
	}
	env.objects.addConfigMap("ns", "missing", map[string]string{})
	pod.Spec.Volumes = pod.Spec.Volumes[:2]
	mustSetUp(t, env.m, pod)
	if !env.m.Ready(pod.UID) {
		t.Error("not Ready once every volume is set up")
	}
}

func TestReadyIsFalseForUnknownPod(t *testing.T) {
	env := newTestEnv(t)
	if env.m.Ready("nope") {
		t.Error("Ready for a pod never set up")
	}
	pod := newPod()
	mustSetUp(t, env.m, pod)
	if !env.m.Ready(pod.UID) {
		t.Error("a pod without volumes is not Ready")
	}
}

func readlink(dir string) (string, error) {
	return os.Readlink(filepath.Join(dir, dataDirName))
}
