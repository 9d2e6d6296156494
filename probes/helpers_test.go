package probes

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// t0 is the fake clock's start; containers start then unless a test says otherwise.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// eventually polls cond until it holds, failing the test after 10 s. It waits on a ticker between polls;
// time in the code under test moves only with the fake clock.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// execScript is what the fake runtime does for one command (by its first word).
type execScript struct {
	exit    int32
	output  string
	err     error
	gate    chan struct{} // when set, each call waits for a value before answering
	calls   int
	ids     []string
	timeout time.Duration
}

// fakeExec is a scripted Execer. Commands without a script exit 0.
type fakeExec struct {
	mu      sync.Mutex
	scripts map[string]*execScript
	onCall  func(containerID string, cmd []string) // called before answering, outside the lock
}

func newFakeExec() *fakeExec { return &fakeExec{scripts: map[string]*execScript{}} }

// script returns the command's script, creating it.
func (f *fakeExec) script(cmd string) *execScript {
	s := f.scripts[cmd]
	if s == nil {
		s = &execScript{}
		f.scripts[cmd] = s
	}
	return s
}

// set makes cmd exit with code and output from now on.
func (f *fakeExec) set(cmd string, exit int32, output string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.script(cmd)
	s.exit, s.output = exit, output
}

// gated makes every call of cmd wait for a value sent on the returned channel.
func (f *fakeExec) gated(cmd string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.script(cmd)
	s.gate = make(chan struct{})
	return s.gate
}

// calls is how often cmd was run.
func (f *fakeExec) calls(cmd string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.script(cmd).calls
}

// ids lists the container IDs cmd ran in.
func (f *fakeExec) ids(cmd string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.script(cmd).ids...)
}

// ExecSync answers from the command's script.
func (f *fakeExec) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	f.mu.Lock()
	s := f.script(cmd[0])
	s.calls++
	s.ids = append(s.ids, id)
	s.timeout = timeout
	gate, onCall := s.gate, f.onCall
	f.mu.Unlock()
	if onCall != nil {
		onCall(id, cmd)
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	return &runtimeapi.ExecSyncResponse{ExitCode: s.exit, Stdout: []byte(s.output)}, nil
}

// event is one recorded event.
type event struct {
	ref                        *corev1.ObjectReference
	eventtype, reason, message string
}

// fakeRecorder keeps events.
type fakeRecorder struct {
	mu     sync.Mutex
	events []event
}

func (r *fakeRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref, _ := object.(*corev1.ObjectReference)
	r.events = append(r.events, event{ref: ref, eventtype: eventtype, reason: reason, message: message})
}

// list returns the events so far.
func (r *fakeRecorder) list() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// messages returns the events' messages.
func (r *fakeRecorder) messages() []string {
	var out []string
	for _, e := range r.list() {
		out = append(out, e.message)
	}
	return out
}

// harness is a Manager on a fake clock, fake runtime and fake recorder, counting OnChange calls.
type harness struct {
	t     *testing.T
	clock *testingclock.FakeClock
	exec  *fakeExec
	rec   *fakeRecorder
	m     *Manager

	mu      sync.Mutex
	changes []types.NamespacedName
}

// newHarness builds a harness whose workers are all stopped, and seen to exit, when the test ends.
func newHarness(t *testing.T) *harness {
	h := &harness{t: t, clock: testingclock.NewFakeClock(t0), exec: newFakeExec(), rec: &fakeRecorder{}}
	h.m = &Manager{Exec: h.exec, Clock: h.clock, Recorder: h.rec, OnChange: h.onChange}
	t.Cleanup(h.stopAll)
	return h
}

func (h *harness) onChange(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.changes = append(h.changes, key)
}

// changeCount is how often OnChange was called.
func (h *harness) changeCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.changes)
}

// workers lists the running workers.
func (h *harness) workers() []*worker {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	var out []*worker
	for _, ps := range h.m.pods {
		for _, w := range ps.workers {
			out = append(out, w)
		}
	}
	return out
}

// worker returns the pod's worker of a container and probe type, or nil.
func (h *harness) worker(uid types.UID, container string, kind probeType) *worker {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if ps := h.m.pods[uid]; ps != nil {
		return ps.workers[workerKey{container: container, kind: kind}]
	}
	return nil
}

// stopAll removes every pod and waits for all workers to exit.
func (h *harness) stopAll() {
	ws := h.workers()
	h.m.mu.Lock()
	var uids []types.UID
	for uid := range h.m.pods {
		uids = append(uids, uid)
	}
	h.m.mu.Unlock()
	for _, uid := range uids {
		h.m.RemovePod(uid)
	}
	for _, w := range ws {
		waitDone(h.t, w)
	}
}

// waitDone waits for a worker's goroutine to exit.
func waitDone(t *testing.T, w *worker) {
	t.Helper()
	eventually(t, "worker "+w.kind.String()+" of "+w.container.Name+" to exit", func() bool {
		select {
		case <-w.done:
			return true
		default:
			return false
		}
	})
}

// step advances the fake clock.
func (h *harness) step(d time.Duration) { h.clock.Step(d) }

// running is a running container attempt started at t0.
func running(name, id string) ContainerInfo {
	return ContainerInfo{Name: name, ID: id, StartedAt: t0, Running: true}
}

// newPod returns a pod with one container "app" carrying the given probes.
func newPod(liveness, readiness, startup *corev1.Probe) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1", ResourceVersion: "7"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{
				Name: "app", LivenessProbe: liveness, ReadinessProbe: readiness, StartupProbe: startup,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}},
		},
	}
}

// execProbe is an exec probe running cmd, with a 10 s period and the given thresholds.
func execProbe(cmd string, failureThreshold, successThreshold int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{cmd}}},
		PeriodSeconds:    10,
		TimeoutSeconds:   1,
		FailureThreshold: failureThreshold,
		SuccessThreshold: successThreshold,
	}
}

// podKey is the key of newPod's pod.
var podKey = types.NamespacedName{Namespace: "ns", Name: "web"}
