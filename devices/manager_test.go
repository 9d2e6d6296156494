package devices

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/devices/checkpoint"
)

// plugin is a device plugin for tests: it lists its devices (and the changes sent on update), answers
// Allocate with a mount and an environment variable per device, prefers the devices in prefer, and
// records its PreStartContainer calls.
type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	opts    *pluginapi.DevicePluginOptions
	devices []*pluginapi.Device
	prefer  []string
	update  chan []*pluginapi.Device

	mu        sync.Mutex
	preStarts [][]string
	srv       *grpc.Server
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return p.opts, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	for {
		select {
		case d := <-p.update:
			if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: d}); err != nil {
				return err
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *plugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: p.prefer}}}, nil
}

func (p *plugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range r.ContainerRequests {
		car := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"DEVICES": strings.Join(cr.DevicesIds, ",")}}
		for _, id := range cr.DevicesIds {
			car.Mounts = append(car.Mounts, &pluginapi.Mount{ContainerPath: "/dev/" + id, HostPath: "/tmp/" + id})
			car.CdiDevices = append(car.CdiDevices, &pluginapi.CDIDevice{Name: "example.com/resource=" + id})
		}
		resp.ContainerResponses = append(resp.ContainerResponses, car)
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.preStarts = append(p.preStarts, r.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}

// serve starts the plugin on dir/name and registers it with the manager's socket.
func (p *plugin) serve(t *testing.T, dir, name, resourceName string) error {
	t.Helper()
	lis, err := net.Listen("unix", filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	p.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.srv, p)
	go func() { _ = p.srv.Serve(lis) }()
	t.Cleanup(p.srv.Stop)
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, KubeletSocket), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(context.Background(), &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: name, ResourceName: resourceName, Options: p.opts,
	}, grpc.WaitForReady(true))
	return err
}

// bed is a manager serving its registration socket in a temporary directory, with a fake clock; changes
// counts its OnChange calls.
type bed struct {
	dir     string
	clock   *clocktesting.FakeClock
	m       *Manager
	changes chan struct{}
	health  chan []types.UID
	stop    context.CancelFunc
}

func newBed(t *testing.T, dir string) *bed {
	t.Helper()
	b := &bed{dir: dir, clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), changes: make(chan struct{}, 100),
		health: make(chan []types.UID, 10)}
	m, err := NewManager(Options{Dir: dir, Log: testr.New(t), Clock: b.clock, OnChange: func() { b.changes <- struct{}{} },
		OnHealthChange: func(uids []types.UID) { b.health <- uids }})
	if err != nil {
		t.Fatal(err)
	}
	b.m = m
	ctx, cancel := context.WithCancel(context.Background())
	b.stop = cancel
	lis, err := m.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := m.Serve(ctx, lis); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return b
}

// waitFor waits until the manager reports a change after which cond holds.
func (b *bed) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-b.changes:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (b *bed) counts(name string) (capacity, allocatable int64) {
	c, a, _ := b.m.Capacity()
	cq, aq := c[corev1.ResourceName(name)], a[corev1.ResourceName(name)]
	return cq.Value(), aq.Value()
}

func devicePod(uid, name string, init, regular map[string]int64) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "default"}}
	limits := func(n int64) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{"example.com/resource": *resource.NewQuantity(n, resource.DecimalSI)}}
	}
	for c, n := range init {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: c, Resources: limits(n)})
	}
	for c, n := range regular {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Resources: limits(n)})
	}
	return pod
}

// holding is a keep function: these pods hold their devices, the others not.
func holding(pods ...*corev1.Pod) func(types.UID) bool {
	return func(uid types.UID) bool {
		for _, p := range pods {
			if p.UID == uid {
				return true
			}
		}
		return false
	}
}

func healthy(ids ...string) []*pluginapi.Device {
	var out []*pluginapi.Device
	for _, id := range ids {
		out = append(out, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	return out
}

func TestDevicePluginLifecycle(t *testing.T) {
	dir := t.TempDir()
	b := newBed(t, dir)
	p := &plugin{opts: &pluginapi.DevicePluginOptions{PreStartRequired: true}, devices: healthy("dev-1", "dev-2"), update: make(chan []*pluginapi.Device)}
	if err := p.serve(t, dir, "dp.sock", "example.com/resource"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "two devices", func() bool { c, a := b.counts("example.com/resource"); return c == 2 && a == 2 })

	ctx := context.Background()
	pod1 := devicePod("uid-1", "one", nil, map[string]int64{"c": 1})
	if err := b.m.Allocate(ctx, pod1, holding()); err != nil {
		t.Fatal(err)
	}
	opts, err := b.m.RunContainerOptions(ctx, pod1, &pod1.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Envs) != 1 || opts.Envs[0].Key != "DEVICES" || string(opts.Envs[0].Value) != "dev-1" || len(opts.Mounts) != 1 || opts.Mounts[0].ContainerPath != "/dev/dev-1" ||
		len(opts.CDIDevices) != 1 || opts.CDIDevices[0].Name != "example.com/resource=dev-1" {
		t.Fatalf("run options %+v", opts)
	}
	if len(p.preStarts) != 1 || p.preStarts[0][0] != "dev-1" {
		t.Fatalf("PreStartContainer calls %v", p.preStarts)
	}

	pod2 := devicePod("uid-2", "two", nil, map[string]int64{"c": 2})
	err = b.m.Allocate(ctx, pod2, holding(pod1))
	if err == nil || err.Error() != "requested number of devices unavailable for example.com/resource. Requested: 2, Available: 1" {
		t.Fatalf("Allocate of a pod asking for more than is free: %v", err)
	}
	// pod1 gone (not active): its device is free again.
	if err := b.m.Allocate(ctx, pod2, holding()); err != nil {
		t.Fatal(err)
	}
	if got := b.m.ContainerDevices("uid-2", "c")["example.com/resource"][nodeWithoutTopology]; len(got) != 2 {
		t.Fatalf("pod2's devices %v", got)
	}
	if len(b.m.ContainerDevices("uid-1", "c")) != 0 {
		t.Fatal("an inactive pod keeps its devices")
	}

	p.update <- []*pluginapi.Device{{ID: "dev-1", Health: pluginapi.Healthy}, {ID: "dev-2", Health: pluginapi.Unhealthy}}
	b.waitFor(t, "one unhealthy device", func() bool { c, a := b.counts("example.com/resource"); return c == 2 && a == 1 })
	if uids := <-b.health; len(uids) != 1 || uids[0] != "uid-2" {
		t.Fatalf("health change told for %v, want uid-2", uids)
	}
	want := []corev1.ResourceStatus{{Name: "example.com/resource", Resources: []corev1.ResourceHealth{
		{ResourceID: "dev-1", Health: corev1.ResourceHealthStatusHealthy}, {ResourceID: "dev-2", Health: corev1.ResourceHealthStatusUnhealthy}}}}
	if got := b.m.AllocatedResourcesStatus("uid-2", "c"); !reflect.DeepEqual(got, want) {
		t.Fatalf("allocatedResourcesStatus %+v, want %+v", got, want)
	}

	p.srv.Stop()
	b.waitFor(t, "the plugin gone", func() bool { c, a := b.counts("example.com/resource"); return c == 2 && a == 0 })
	b.clock.Step(stopGracePeriod + time.Second)
	_, _, deleted := b.m.Capacity()
	if len(deleted) != 1 || deleted[0] != "example.com/resource" {
		t.Fatalf("deleted %v after the grace period", deleted)
	}
	if c, _, _ := b.m.Capacity(); len(c) != 0 {
		t.Fatalf("capacity %v after the grace period", c)
	}
}

func TestDevicesSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	b := newBed(t, dir)
	p := &plugin{opts: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, devices: healthy("a", "b", "c"), prefer: []string{"c"}, update: make(chan []*pluginapi.Device)}
	if err := p.serve(t, dir, "dp.sock", "example.com/resource"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "three devices", func() bool { _, a := b.counts("example.com/resource"); return a == 3 })
	pod := devicePod("uid-1", "one", map[string]int64{"init": 2}, map[string]int64{"c": 1})
	if err := b.m.Allocate(context.Background(), pod, nil); err != nil { // nil: nothing released
		t.Fatal(err)
	}
	// The init container gets the preferred device and the first other; the container reuses one of them.
	if got := b.m.ContainerDevices("uid-1", "init")["example.com/resource"][nodeWithoutTopology]; strings.Join(got, ",") != "a,c" {
		t.Fatalf("init container's devices %v", got)
	}
	if got := b.m.ContainerDevices("uid-1", "c")["example.com/resource"][nodeWithoutTopology]; strings.Join(got, ",") != "a" {
		t.Fatalf("container's devices %v", got)
	}
	b.stop()
	p.srv.Stop()

	again := newBed(t, dir)
	if got := again.m.ContainerDevices("uid-1", "c")["example.com/resource"][nodeWithoutTopology]; strings.Join(got, ",") != "a" {
		t.Fatalf("container's devices after a restart %v", got)
	}
	opts, err := again.m.RunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0])
	if err == nil {
		t.Fatalf("run options without the plugin: %+v", opts)
	}
	if c, a := again.counts("example.com/resource"); c != 0 || a != 0 {
		t.Fatalf("capacity %d allocatable %d before the plugin registers again", c, a)
	}
	if _, _, deleted := again.m.Capacity(); len(deleted) != 0 {
		t.Fatalf("deleted %v before the grace period", deleted)
	}
}

func TestRegistrationIsValidated(t *testing.T) {
	dir := t.TempDir()
	newBed(t, dir)
	for _, tc := range []struct{ version, resource, endpoint, want string }{
		{"v1alpha", "example.com/resource", "dp.sock", `requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]`},
		{pluginapi.Version, "cpu", "dp.sock", `the ResourceName "cpu" is invalid`},
		{pluginapi.Version, "example.com/resource", "../dp.sock", `invalid endpoint "../dp.sock"`},
	} {
		conn, err := grpc.NewClient("unix://"+filepath.Join(dir, KubeletSocket), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = pluginapi.NewRegistrationClient(conn).Register(context.Background(), &pluginapi.RegisterRequest{
			Version: tc.version, Endpoint: tc.endpoint, ResourceName: tc.resource,
		}, grpc.WaitForReady(true))
		_ = conn.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Register(%s, %s, %s) = %v, want %q", tc.version, tc.resource, tc.endpoint, err, tc.want)
		}
	}
}

// A corrupt checkpoint is logged and the manager starts empty, as the kubelet's.
func TestCorruptCheckpointStartsEmpty(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, checkpoint.File), []byte(`{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{"example.com/resource":["a"]}},"Checksum":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(Options{Dir: dir, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if c, _, _ := m.Capacity(); len(c) != 0 {
		t.Fatalf("capacity %v from a corrupt checkpoint", c)
	}
}
