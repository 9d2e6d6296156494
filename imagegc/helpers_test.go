package imagegc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	mountpoint = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"
	nodeName   = "node-a"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeRuntime is an in-memory Runtime: images by ID, the containers using them, and scripted failures.
type fakeRuntime struct {
	mu         sync.Mutex
	images     []*runtimeapi.Image
	containers []*runtimeapi.Container
	removed    []string // image IDs, in removal order
	removeErr  map[string]error
	listErr    error
	fsInfo     *runtimeapi.ImageFsInfoResponse
	fsErr      error
	calls      int // ListImages calls
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{
		removeErr: map[string]error{},
		fsInfo: &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
			FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: mountpoint}, UsedBytes: &runtimeapi.UInt64Value{Value: 1},
		}}},
	}
}

func (r *fakeRuntime) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.listErr != nil {
		return nil, r.listErr
	}
	return slices.Clone(r.images), nil
}

func (r *fakeRuntime) ListContainers(_ context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f.GetState() != nil {
		return nil, errors.New("image GC must list containers in every state")
	}
	return slices.Clone(r.containers), nil
}

func (r *fakeRuntime) RemoveImage(_ context.Context, spec *runtimeapi.ImageSpec) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.removeErr[spec.GetImage()]; err != nil {
		return err
	}
	r.removed = append(r.removed, spec.GetImage())
	r.images = slices.DeleteFunc(r.images, func(i *runtimeapi.Image) bool { return i.Id == spec.GetImage() })
	return nil
}

func (r *fakeRuntime) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fsInfo, r.fsErr
}

// addImage adds an image of size bytes with ID "sha256:<name>" and tag "<name>:1".
func (r *fakeRuntime) addImage(name string, size uint64, mutate ...func(*runtimeapi.Image)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	img := &runtimeapi.Image{Id: id(name), RepoTags: []string{name + ":1"}, Size: size}
	for _, m := range mutate {
		m(img)
	}
	r.images = append(r.images, img)
}

// use makes a container in state use the image name (by image_id, as containerd reports it).
func (r *fakeRuntime) use(name string, state runtimeapi.ContainerState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.containers = append(r.containers, &runtimeapi.Container{
		Id: "c-" + name + fmt.Sprint(len(r.containers)), Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image: &runtimeapi.ImageSpec{Image: name + ":1"}, ImageRef: id(name), ImageId: id(name), State: state,
	})
}

func (r *fakeRuntime) stopUsingAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.containers = nil
}

func (r *fakeRuntime) removedNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.removed))
	for _, id := range r.removed {
		out = append(out, strings.TrimPrefix(id, "sha256:"))
	}
	return out
}

func (r *fakeRuntime) listCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func id(name string) string { return "sha256:" + name }

// fakeFS is a Filesystem with one mountpoint of fixed capacity and available bytes.
type fakeFS struct {
	capacity, available int64
	err                 error
	paths               []string
}

func (f *fakeFS) Usage(path string) (int64, int64, error) {
	f.paths = append(f.paths, path)
	if f.err != nil {
		return 0, 0, f.err
	}
	if path != mountpoint {
		return 0, 0, &fs.PathError{Op: "statfs", Path: path, Err: fs.ErrNotExist}
	}
	return f.capacity, f.available, nil
}

// harness is a Manager on a fake runtime, filesystem, clock, recorder and registry.
type harness struct {
	m      *Manager
	rt     *fakeRuntime
	fs     *fakeFS
	clock  *clocktesting.FakeClock
	events *record.FakeRecorder
	reg    *prometheus.Registry
}

func newHarness(t *testing.T, p Policy, mutate ...func(*Options)) *harness {
	t.Helper()
	h := &harness{
		rt: newFakeRuntime(), fs: &fakeFS{capacity: 1000, available: 1000}, clock: clocktesting.NewFakeClock(t0),
		events: record.NewFakeRecorder(100), reg: prometheus.NewRegistry(),
	}
	opts := Options{Runtime: h.rt, Filesystem: h.fs, Clock: h.clock, Recorder: h.events, NodeName: nodeName,
		Metrics: h.reg, Policy: p}
	for _, m := range mutate {
		m(&opts)
	}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	return h
}

// detect is the periodic detection at the fake clock's time.
func (h *harness) detect(t *testing.T) {
	t.Helper()
	if _, err := h.m.detectImages(context.Background(), h.clock.Now()); err != nil {
		t.Fatal(err)
	}
}

// gc runs GarbageCollect with the Manager started at t0.
func (h *harness) gc() error { return h.m.GarbageCollect(context.Background(), t0) }

// drainEvents returns the events recorded so far ("Warning Reason message").
func (h *harness) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (h *harness) collected(reason string) float64 {
	return testutil.ToFloat64(h.m.metrics.collected.WithLabelValues(reason))
}

func defaultPolicy() Policy {
	return Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}
}
