package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeMounter records mount calls and keeps the set of mount points in memory.
type fakeMounter struct {
	mu      sync.Mutex
	mounted map[string]string // target -> "tmpfs size=N" or "bind <source>"
	calls   []string
	failOn  string          // a call prefix that fails
	loops   map[string]bool // paths with a loop device over them
}

func newFakeMounter() *fakeMounter { return &fakeMounter{mounted: map[string]string{}} }

func (f *fakeMounter) record(call string) error {
	f.calls = append(f.calls, call)
	if f.failOn != "" && strings.HasPrefix(call, f.failOn) {
		return errors.New("injected mount failure")
	}
	return nil
}

func (f *fakeMounter) MountTmpfs(target string, size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(fmt.Sprintf("tmpfs %s size=%d", target, size)); err != nil {
		return err
	}
	f.mounted[target] = fmt.Sprintf("tmpfs size=%d", size)
	return nil
}

// BindMount resolves a /proc/<pid>/fd/<n> source to the file it names, as the kernel would.
func (f *fakeMounter) BindMount(source, target string, readOnly bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if real, err := os.Readlink(source); err == nil && strings.HasPrefix(source, "/proc/") {
		source = real
	}
	if err := f.record(fmt.Sprintf("bind %s %s ro=%t", source, target, readOnly)); err != nil {
		return err
	}
	f.mounted[target] = "bind " + source
	return nil
}

func (f *fakeMounter) FormatAndMount(device, target, fsType string, options []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(fmt.Sprintf("format-and-mount %s %s %s %v", device, target, fsType, options)); err != nil {
		return err
	}
	f.mounted[target] = "device " + device
	return nil
}

// AttachFileDevice records a loop device over path (one per path).
func (f *fakeMounter) AttachFileDevice(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("loop-attach " + path); err != nil {
		return err
	}
	if f.loops == nil {
		f.loops = map[string]bool{}
	}
	f.loops[path] = true
	return nil
}

func (f *fakeMounter) DetachFileDevice(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("loop-detach " + path); err != nil {
		return err
	}
	delete(f.loops, path)
	return nil
}

func (f *fakeMounter) Unmount(target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("unmount " + target); err != nil {
		return err
	}
	if _, ok := f.mounted[target]; !ok {
		return fmt.Errorf("%s is not mounted", target)
	}
	delete(f.mounted, target)
	return nil
}

func (f *fakeMounter) IsMountPoint(path string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.mounted[path]
	return ok, nil
}

func (f *fakeMounter) callsWith(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// fakeObjects serves ConfigMaps and Secrets from maps and mints tokens, recording CreateToken calls.
type fakeObjects struct {
	mu         sync.Mutex
	clock      *clocktesting.FakeClock
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
	tokenCalls []*authenticationv1.TokenRequest
	tokenSA    []string
	tokenErr   error
	getErr     error
	claims     map[string]*corev1.PersistentVolumeClaim
	pvs        map[string]*corev1.PersistentVolume
	claimReads int
}

func newFakeObjects(clk *clocktesting.FakeClock) *fakeObjects {
	return &fakeObjects{clock: clk, configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		claims: map[string]*corev1.PersistentVolumeClaim{}, pvs: map[string]*corev1.PersistentVolume{}}
}

func (f *fakeObjects) GetPersistentVolumeClaim(_ context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claimReads++
	c, ok := f.claims[ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, name)
	}
	return c.DeepCopy(), nil
}

func (f *fakeObjects) GetPersistentVolume(_ context.Context, name string) (*corev1.PersistentVolume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pv, ok := f.pvs[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, name)
	}
	return pv.DeepCopy(), nil
}

func (f *fakeObjects) addConfigMap(ns, name string, data map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configMaps[ns+"/"+name] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func (f *fakeObjects) addSecret(ns, name string, data map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	f.secrets[ns+"/"+name] = s
}

func (f *fakeObjects) GetConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.getErr != nil {
		return nil, f.getErr
	}
	cm, ok := f.configMaps[ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmap"}, name)
	}
	return cm.DeepCopy(), nil
}

func (f *fakeObjects) GetSecret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.secrets[ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secret"}, name)
	}
	return s.DeepCopy(), nil
}

func (f *fakeObjects) CreateToken(_ context.Context, ns, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokenCalls = append(f.tokenCalls, req.DeepCopy())
	f.tokenSA = append(f.tokenSA, ns+"/"+sa)
	if f.tokenErr != nil {
		return nil, f.tokenErr
	}
	out := req.DeepCopy()
	exp := time.Duration(*req.Spec.ExpirationSeconds) * time.Second
	out.Status.Token = fmt.Sprintf("token-%d", len(f.tokenCalls))
	out.Status.ExpirationTimestamp = metav1.NewTime(f.clock.Now().Add(exp))
	return out, nil
}

func (f *fakeObjects) tokenCallCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tokenCalls)
}

var testStart = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

type testEnv struct {
	m       *Manager
	mounter *fakeMounter
	objects *fakeObjects
	clock   *clocktesting.FakeClock
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	clk := clocktesting.NewFakeClock(testStart)
	env := &testEnv{mounter: newFakeMounter(), objects: newFakeObjects(clk), clock: clk}
	env.m = &Manager{RootDir: t.TempDir(), Objects: env.objects, Clock: clk, NodeName: "node-1", Mounter: env.mounter}
	return env
}

// newPod is a pod bound to node-1 with the given volumes and one container.
// Its ephemeral container "uses" mounts every volume at /volumes/<name> (a volume no container uses is
// not set up); as an ephemeral container it counts in no resource rule.
func newPod(vols ...corev1.Volume) *corev1.Pod {
	uses := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "uses"}}
	for _, v := range vols {
		uses.VolumeMounts = append(uses.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/volumes/" + v.Name})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: types.UID("uid-1")},
		Spec: corev1.PodSpec{
			NodeName:            "node-1",
			ServiceAccountName:  "app",
			Volumes:             vols,
			Containers:          []corev1.Container{{Name: "c"}},
			EphemeralContainers: []corev1.EphemeralContainer{uses},
		},
	}
}

func vol(name string, src corev1.VolumeSource) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: src}
}

// mustSetUp runs SetUp and fails the test on any error.
func mustSetUp(t *testing.T, m *Manager, pod *corev1.Pod) {
	t.Helper()
	if errs := m.SetUp(context.Background(), pod); len(errs) > 0 {
		t.Fatalf("SetUp: %v", errs)
	}
}

// readVolume reads every user-visible file of a volume dir (through its symlinks), keyed by relative path.
func readVolume(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		readTree(t, filepath.Join(dir, e.Name()), e.Name(), out)
	}
	return out
}

func readTree(t *testing.T, path, rel string, out map[string]string) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !info.IsDir() {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out[rel] = string(data)
		return
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		readTree(t, filepath.Join(path, e.Name()), rel+"/"+e.Name(), out)
	}
}

func modeOf(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode()
}

func ptrTo[T any](v T) *T { return &v }

// must is the path a path builder returned for identifiers a test knows to be valid.
func must(path string, err error) string {
	if err != nil {
		panic(err)
	}
	return path
}
