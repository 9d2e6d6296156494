package containergc

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/runtime"
)

// t0 is the fake clock's start: "now" of every pass that does not step it.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	exited   = runtimeapi.ContainerState_CONTAINER_EXITED
	running  = runtimeapi.ContainerState_CONTAINER_RUNNING
	created  = runtimeapi.ContainerState_CONTAINER_CREATED
	unknown  = runtimeapi.ContainerState_CONTAINER_UNKNOWN
	ready    = runtimeapi.PodSandboxState_SANDBOX_READY
	notReady = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
)

// fakeRuntime is an in-memory Runtime: containers and sandboxes by ID, the log path each container's
// status reports, scripted failures and the calls that change something.
type fakeRuntime struct {
	mu         sync.Mutex
	containers map[string]*runtimeapi.Container
	sandboxes  map[string]*runtimeapi.PodSandbox
	logPaths   map[string]string
	calls      []string
	lists      int
	listErr    error
	statusErr  map[string]error
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{containers: map[string]*runtimeapi.Container{}, sandboxes: map[string]*runtimeapi.PodSandbox{},
		logPaths: map[string]string{}, statusErr: map[string]error{}}
}

// sandbox adds a sandbox of the pod uid, created age before t0; its ID is sb-<uid>-<attempt>.
func (f *fakeRuntime) sandbox(uid types.UID, attempt uint32, age time.Duration, state runtimeapi.PodSandboxState) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := fmt.Sprintf("sb-%s-%d", uid, attempt)
	f.sandboxes[id] = &runtimeapi.PodSandbox{Id: id, State: state, CreatedAt: t0.Add(-age).UnixNano(),
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod-" + string(uid), Namespace: "ns", Uid: string(uid), Attempt: attempt},
		Labels:   map[string]string{runtime.LabelPodUID: string(uid), runtime.LabelPodName: "pod-" + string(uid), runtime.LabelPodNamespace: "ns"}}
	return id
}

// container adds attempt restartCount of the pod uid's container name, in sandbox sb-<uid>-0, created age
// before t0; its ID is <uid>-<name>-<restartCount>.
func (f *fakeRuntime) container(uid types.UID, name string, restartCount int, age time.Duration, state runtimeapi.ContainerState) string {
	return f.containerIn(fmt.Sprintf("sb-%s-0", uid), uid, name, restartCount, age, state)
}

func (f *fakeRuntime) containerIn(sandboxID string, uid types.UID, name string, restartCount int, age time.Duration, state runtimeapi.ContainerState) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := fmt.Sprintf("%s-%s-%d", uid, name, restartCount)
	f.containers[id] = &runtimeapi.Container{Id: id, PodSandboxId: sandboxID, State: state, CreatedAt: t0.Add(-age).UnixNano(),
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: uint32(restartCount)},
		Labels: map[string]string{runtime.LabelPodUID: string(uid), runtime.LabelPodName: "pod-" + string(uid),
			runtime.LabelPodNamespace: "ns", runtime.LabelContainerName: name},
		Annotations: map[string]string{runtime.AnnotationContainerRestartCount: strconv.Itoa(restartCount)}}
	return id
}

func (f *fakeRuntime) ListContainers(_ context.Context, _ *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []*runtimeapi.Container
	for _, id := range slices.Sorted(maps.Keys(f.containers)) {
		out = append(out, proto.CloneOf(f.containers[id]))
	}
	return out, nil
}

func (f *fakeRuntime) ListPodSandbox(_ context.Context, _ *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []*runtimeapi.PodSandbox
	for _, id := range slices.Sorted(maps.Keys(f.sandboxes)) {
		out = append(out, proto.CloneOf(f.sandboxes[id]))
	}
	return out, nil
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.statusErr[id]; err != nil {
		return nil, err
	}
	c, ok := f.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %q: %w", id, runtime.ErrNotFound)
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, Metadata: c.Metadata, State: c.State,
		CreatedAt: c.CreatedAt, Labels: c.Labels, Annotations: c.Annotations, LogPath: f.logPaths[id]}}, nil
}

func (f *fakeRuntime) StopContainer(_ context.Context, id string, timeout int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return fmt.Errorf("container %q: %w", id, runtime.ErrNotFound)
	}
	c.State = exited
	f.calls = append(f.calls, fmt.Sprintf("StopContainer %s %d", id, timeout))
	return nil
}

func (f *fakeRuntime) RemoveContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.containers[id]; ok && c.State == running {
		panic("RemoveContainer of a running container " + id)
	}
	delete(f.containers, id)
	f.calls = append(f.calls, "RemoveContainer "+id)
	return nil
}

func (f *fakeRuntime) StopPodSandbox(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sandboxes[id]
	if !ok {
		return fmt.Errorf("sandbox %q: %w", id, runtime.ErrNotFound)
	}
	s.State = notReady
	f.calls = append(f.calls, "StopPodSandbox "+id)
	return nil
}

func (f *fakeRuntime) RemovePodSandbox(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for cid, c := range f.containers {
		if c.PodSandboxId == id {
			delete(f.containers, cid)
		}
	}
	delete(f.sandboxes, id)
	f.calls = append(f.calls, "RemovePodSandbox "+id)
	return nil
}

func (f *fakeRuntime) listCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

// containerIDs are the containers left, sorted.
func (f *fakeRuntime) containerIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.containers))
}

// sandboxIDs are the sandboxes left, sorted.
func (f *fakeRuntime) sandboxIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.sandboxes))
}

func (f *fakeRuntime) callList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// fakePods answers PodsForGC: the pods the node still has (true: busy) and whether the sources are ready.
type fakePods struct {
	mu    sync.Mutex
	pods  map[types.UID]bool
	ready bool
}

func (p *fakePods) PodsForGC(context.Context) (map[types.UID]bool, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.pods), p.ready
}

// harness is a Collector over a fakeRuntime and fakePods, on a fake clock at t0.
type harness struct {
	rt     *fakeRuntime
	pods   *fakePods
	clock  *clocktesting.FakeClock
	events *record.FakeRecorder
	c      *Collector
}

// newHarness builds a Collector with the kubelet's default policy unless p is given; the pods source is
// ready and knows no pod unless the test says otherwise.
func newHarness(t *testing.T, p Policy, mutate ...func(*Options)) *harness {
	t.Helper()
	h := &harness{rt: newFakeRuntime(), pods: &fakePods{pods: map[types.UID]bool{}, ready: true},
		clock: clocktesting.NewFakeClock(t0), events: record.NewFakeRecorder(10)}
	opts := Options{Runtime: h.rt, Pods: h.pods, Clock: h.clock, Recorder: h.events, NodeName: "node-a", Policy: p,
		PodLogsDir: t.TempDir()}
	for _, m := range mutate {
		m(&opts)
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	return h
}

// defaultPolicy is the kubelet's: no minimum age, one dead container per unit, no node limit.
var defaultPolicy = Policy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}

func (h *harness) collect(t *testing.T) {
	t.Helper()
	if err := h.c.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
}
