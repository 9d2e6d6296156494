package podsyncer

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/runtime"
)

// stopRecorder is a runtime that records stops and lets a test hold a container's stop.
type stopRecorder struct {
	Runtime
	mu      sync.Mutex
	log     []string
	hold    map[string]chan struct{} // container ID → released when closed
	stopped chan string
	podIP   string
}

func (s *stopRecorder) record(entry string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, entry)
}

func (s *stopRecorder) entries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

func (s *stopRecorder) StopContainer(_ context.Context, id string, _ int64) error {
	if ch, ok := s.hold[id]; ok {
		<-ch
	}
	s.record("stop " + id)
	s.stopped <- id
	return nil
}

func (s *stopRecorder) GetPodStatus(_ context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
	return &runtime.PodStatus{UID: uid, Name: name, Namespace: namespace, IPs: []string{s.podIP}}, nil
}

// sidecarPod is the upstream "Restartable Init Container Lifecycle Hook" pod: a sidecar serving HTTP,
// a second sidecar whose preStop httpGet hook calls the first (on the pod IP), and a main container.
func sidecarPod(hookPort int) *corev1.Pod {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	return &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "container-redirect", RestartPolicy: always},
			{Name: "pod-with-prestop-http-hook", RestartPolicy: always, Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/echo?msg=prestop", Port: intstr.FromInt(hookPort)}}}},
		},
		Containers: []corev1.Container{{Name: "main"}},
	}}
}

// A sidecar is stopped only after the regular containers and the sidecars declared after it, while every
// preStop hook runs at once: the hook of the second sidecar reaches the HTTP server of the first.
func TestKillAllStopsSidecarsLastInReverseOrder(t *testing.T) {
	rt := &stopRecorder{hold: map[string]chan struct{}{"main": make(chan struct{})}, stopped: make(chan string, 3), podIP: "127.0.0.1"}
	hooked := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rt.record("hook " + req.URL.RequestURI())
		close(hooked)
	}))
	defer srv.Close()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	portNum, _ := strconv.Atoi(port)
	pod := sidecarPod(portNum)
	pod.Name, pod.Namespace = "p", "ns"
	clk := clocktesting.NewFakeClock(time.Now()) // the hook's context deadline is a wall-clock one
	r := newTestSyncer(t, Deps{Runtime: rt, Clock: clk}, Options{})
	deadline := clk.Now().Add(15 * time.Second)
	kills := []killAction{
		{container: &runtime.ContainerStatus{ID: "container-redirect", Name: "container-redirect", Kind: runtime.KindSidecar}, deadline: deadline},
		{container: &runtime.ContainerStatus{ID: "pod-with-prestop-http-hook", Name: "pod-with-prestop-http-hook", Kind: runtime.KindSidecar}, deadline: deadline},
		{container: &runtime.ContainerStatus{ID: "main", Name: "main"}, deadline: deadline},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.stop.killAll(context.Background(), pod, kills)
	}()
	select {
	case <-hooked:
	case <-time.After(10 * time.Second):
		t.Fatal("the sidecar's preStop httpGet hook was not called")
	}
	if got := rt.entries(); len(got) != 1 {
		t.Fatalf("before the main container stopped: %v, want only the hook", got)
	}
	close(rt.hold["main"])
	for range kills {
		select {
		case <-rt.stopped:
		case <-time.After(10 * time.Second):
			t.Fatalf("containers not stopped: %v", rt.entries())
		}
	}
	<-done
	want := []string{"hook /echo?msg=prestop", "stop main", "stop pod-with-prestop-http-hook", "stop container-redirect"}
	got := rt.entries()
	if len(got) != len(want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order = %v, want %v", got, want)
		}
	}
}

// The wait for its turn ends with the grace period: a sidecar is never kept past it.
func TestStopOrderWaitEndsAtTheDeadline(t *testing.T) {
	pod := sidecarPod(80)
	kills := []killAction{
		{container: &runtime.ContainerStatus{Name: "container-redirect"}},
		{container: &runtime.ContainerStatus{Name: "main"}},
	}
	o := newStopOrder(pod, kills)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		o.waitForTurn(context.Background(), clk, "container-redirect", clk.Now().Add(5*time.Second))
	}()
	for !clk.HasWaiters() {
		select {
		case <-waited:
			t.Fatal("the sidecar did not wait for the main container")
		case <-time.After(time.Millisecond):
		}
	}
	clk.Step(5 * time.Second)
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the wait outlived the grace period")
	}
}

func TestNewStopOrder(t *testing.T) {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "s1", RestartPolicy: always}, {Name: "init"}, {Name: "s2", RestartPolicy: always}},
		Containers:     []corev1.Container{{Name: "a"}, {Name: "b"}},
	}}
	kill := func(names ...string) []killAction {
		var out []killAction
		for _, n := range names {
			out = append(out, killAction{container: &runtime.ContainerStatus{Name: n}})
		}
		return out
	}
	tests := []struct {
		name  string
		kills []killAction
		// waits is how many containers each must wait for.
		waits map[string]int
	}{
		{"whole pod: sidecars after both regular containers, s1 after s2", kill("a", "b", "s1", "s2"),
			map[string]int{"a": 0, "b": 0, "s2": 2, "s1": 3}},
		{"a regular container alone (liveness kill)", kill("a"), map[string]int{"a": 0}},
		{"a sidecar alone", kill("s1"), map[string]int{"s1": 0}},
		{"only the stopped containers count", kill("b", "s1"), map[string]int{"b": 0, "s1": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newStopOrder(pod, tt.kills)
			for name, n := range tt.waits {
				if got := len(o.after[name]); got != n {
					t.Errorf("%s waits for %d containers, want %d", name, got, n)
				}
			}
		})
	}
}

// A container a failed probe kills gets the probe's grace period, longer or shorter than the pod's, unless
// the pod is being deleted; every other kill ends with the pod's.
func TestKillDeadline(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	podDeadline := now.Add(30 * time.Second)
	pod := &corev1.Pod{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](30)}}
	c := &runtime.ContainerStatus{Name: "main"}
	for _, tt := range []struct {
		name     string
		grace    *int64
		deletion *int64
		want     time.Duration
	}{
		{name: "no probe grace", want: 30 * time.Second},
		{name: "a longer probe grace", grace: ptr.To[int64](120), want: 120 * time.Second},
		{name: "a shorter probe grace", grace: ptr.To[int64](5), want: 5 * time.Second},
		{name: "being deleted", grace: ptr.To[int64](120), deletion: ptr.To[int64](10), want: 10 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := pod.DeepCopy()
			p.DeletionGracePeriodSeconds = tt.deletion
			if got := killDeadline(now, p, killAction{container: c, grace: tt.grace}, podDeadline).Sub(now); got != tt.want {
				t.Errorf("grace = %v, want %v", got, tt.want)
			}
		})
	}
}
