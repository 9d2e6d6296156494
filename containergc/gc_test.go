package containergc

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestNewValidatesPolicy(t *testing.T) {
	rt, pods := newFakeRuntime(), &fakePods{}
	if _, err := New(Options{Runtime: rt, Pods: pods, Policy: Policy{MinAge: -time.Second}}); err == nil ||
		!strings.Contains(err.Error(), "invalid minimum garbage collection age: -1s") {
		t.Errorf("negative MinAge: %v, want the kubelet's error", err)
	}
	if _, err := New(Options{Pods: pods}); err == nil {
		t.Error("no runtime: no error")
	}
	if _, err := New(Options{Runtime: rt}); err == nil {
		t.Error("no pods: no error")
	}
	c, err := New(Options{Runtime: rt, Pods: pods, Policy: Policy{MaxPerPodContainer: -1, MaxContainers: 0}})
	if err != nil || c.podLogs != "/var/log/pods" {
		t.Errorf("New: %v, pod logs dir %q", err, c.podLogs)
	}
}

// crashLoop adds the attempts 0..n-1 of the pod's container "app", one a minute, newest last; the newest is
// in state newest, the others exited.
func crashLoop(rt *fakeRuntime, uid types.UID, n int, newest runtimeapi.ContainerState) {
	rt.sandbox(uid, 0, time.Hour, ready)
	for i := range n {
		state := exited
		if i == n-1 {
			state = newest
		}
		rt.container(uid, "app", i, time.Duration(n-i)*time.Minute, state)
	}
}

func TestContainerSelection(t *testing.T) {
	active := map[types.UID]bool{"a": false}
	for _, tc := range []struct {
		name   string
		policy Policy
		pods   map[types.UID]bool
		ready  bool
		setup  func(rt *fakeRuntime)
		want   []string
	}{
		{"crash loop, running newest: the newest dead one stays", defaultPolicy, active, true,
			func(rt *fakeRuntime) { crashLoop(rt, "a", 4, running) }, []string{"a-app-2", "a-app-3"}},
		{"crash loop in back-off: the newest (dead) one stays", defaultPolicy, active, true,
			func(rt *fakeRuntime) { crashLoop(rt, "a", 4, exited) }, []string{"a-app-3"}},
		{"two dead per container", Policy{MaxPerPodContainer: 2, MaxContainers: -1}, active, true,
			func(rt *fakeRuntime) { crashLoop(rt, "a", 5, running) }, []string{"a-app-2", "a-app-3", "a-app-4"}},
		{"no limit per container", Policy{MaxPerPodContainer: -1, MaxContainers: -1}, active, true,
			func(rt *fakeRuntime) { crashLoop(rt, "a", 3, exited) }, []string{"a-app-0", "a-app-1", "a-app-2"}},
		{"zero per container still keeps the newest dead one of an active pod", Policy{MaxPerPodContainer: 0, MaxContainers: -1}, active, true,
			func(rt *fakeRuntime) { crashLoop(rt, "a", 3, running) }, []string{"a-app-1", "a-app-2"}},
		{"a created container does not push out the newest exited one", defaultPolicy, active, true,
			func(rt *fakeRuntime) { crashLoop(rt, "a", 4, created) }, []string{"a-app-2", "a-app-3"}},
		{"units are per container name", defaultPolicy, active, true,
			func(rt *fakeRuntime) {
				crashLoop(rt, "a", 3, running)
				rt.container("a", "side", 0, 3*time.Minute, exited)
				rt.container("a", "side", 1, 2*time.Minute, exited)
			}, []string{"a-app-1", "a-app-2", "a-side-1"}},
		{"minimum age: younger containers are not counted", Policy{MinAge: 90 * time.Second, MaxPerPodContainer: 1, MaxContainers: -1}, active, true,
			func(rt *fakeRuntime) { crashLoop(rt, "a", 4, exited) }, // ages 4, 3, 2, 1 min
			[]string{"a-app-2", "a-app-3"}},
		{"deleted pod: every dead container goes, the running one stays", defaultPolicy, map[types.UID]bool{}, true,
			func(rt *fakeRuntime) {
				crashLoop(rt, "gone", 3, exited)
				rt.container("gone", "web", 0, time.Minute, running)
			}, []string{"gone-web-0"}},
		{"deleted pod before the sources are ready: kept as active", defaultPolicy, map[types.UID]bool{}, false,
			func(rt *fakeRuntime) { crashLoop(rt, "gone", 3, exited) }, []string{"gone-app-2"}},
		{"pod a worker terminates: nothing is touched", defaultPolicy, map[types.UID]bool{"a": true}, true,
			func(rt *fakeRuntime) { crashLoop(rt, "a", 3, exited) }, []string{"a-app-0", "a-app-1", "a-app-2"}},
		{"containers without a pod UID label are not a pod's", defaultPolicy, map[types.UID]bool{}, true,
			func(rt *fakeRuntime) {
				rt.container("x", "app", 0, time.Minute, exited)
				delete(rt.containers["x-app-0"].Labels, "io.kubernetes.pod.uid")
			}, []string{"x-app-0"}},
		{"max containers: spread over units, at least one each", Policy{MaxPerPodContainer: -1, MaxContainers: 4},
			map[types.UID]bool{"a": false, "b": false, "c": false}, true,
			func(rt *fakeRuntime) {
				for _, uid := range []types.UID{"a", "b", "c"} {
					crashLoop(rt, uid, 3, exited)
				}
			}, []string{"a-app-2", "b-app-2", "c-app-2"}},
		{"max containers: an equal share per unit", Policy{MaxPerPodContainer: -1, MaxContainers: 4},
			map[types.UID]bool{"a": false, "b": false}, true,
			func(rt *fakeRuntime) {
				crashLoop(rt, "a", 4, running)
				crashLoop(rt, "b", 3, exited)
			}, []string{"a-app-1", "a-app-2", "a-app-3", "b-app-1", "b-app-2"}},
		{"max containers: the oldest of all beyond the shares, the newest of each unit never",
			Policy{MaxPerPodContainer: -1, MaxContainers: 4}, map[types.UID]bool{"a": false, "b": false}, true,
			func(rt *fakeRuntime) {
				// a: newest exited, then three created ones that never started (all kept by the share of 2
				// or as the newest / newest exited), b: two exited.
				rt.container("a", "app", 0, 10*time.Minute, exited)
				rt.container("a", "app", 1, 9*time.Minute, created)
				rt.container("a", "app", 2, 8*time.Minute, created)
				rt.container("a", "app", 3, 7*time.Minute, created)
				rt.container("b", "app", 0, 6*time.Minute, exited)
				rt.container("b", "app", 1, 5*time.Minute, exited)
			}, []string{"a-app-0", "a-app-3", "b-app-0", "b-app-1"}},
		{"max containers does not count what goes with deleted pods", Policy{MaxPerPodContainer: -1, MaxContainers: 2},
			map[types.UID]bool{"a": false}, true,
			func(rt *fakeRuntime) {
				crashLoop(rt, "a", 2, exited)
				crashLoop(rt, "gone", 2, exited)
			}, []string{"a-app-0", "a-app-1"}},
		{"terminated pod that is not deleted: the newest of each unit stays", defaultPolicy, active, true,
			func(rt *fakeRuntime) {
				rt.container("a", "init", 0, 5*time.Minute, exited)
				crashLoop(rt, "a", 2, exited)
			}, []string{"a-app-1", "a-init-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.policy)
			h.pods.pods, h.pods.ready = tc.pods, tc.ready
			tc.setup(h.rt)
			h.collect(t)
			if got := h.rt.containerIDs(); !slices.Equal(got, tc.want) {
				t.Errorf("containers left %v, want %v", got, tc.want)
			}
			for _, c := range h.rt.callList() {
				if strings.HasPrefix(c, "StopContainer") {
					t.Errorf("%s: only containers in an unknown state are stopped", c)
				}
			}
		})
	}
}

// The kubelet removes the oldest first.
func TestRemovalOrder(t *testing.T) {
	h := newHarness(t, defaultPolicy)
	h.pods.pods = map[types.UID]bool{"a": false}
	crashLoop(h.rt, "a", 4, running)
	h.collect(t)
	want := []string{"RemoveContainer a-app-0", "RemoveContainer a-app-1"}
	if got := h.rt.callList(); !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
}

// Minimum age on the clock: a dead container goes once it was created MinAge ago, not a moment earlier.
func TestMinimumAgeOnTheClock(t *testing.T) {
	h := newHarness(t, Policy{MinAge: time.Hour, MaxPerPodContainer: 1, MaxContainers: -1})
	crashLoop(h.rt, "gone", 1, exited) // created a minute before t0
	h.collect(t)
	if got := h.rt.containerIDs(); len(got) != 1 {
		t.Fatalf("containers left %v, want the young one", got)
	}
	h.clock.Step(59*time.Minute - time.Nanosecond)
	h.collect(t)
	if got := h.rt.containerIDs(); len(got) != 1 {
		t.Fatalf("containers left %v a nanosecond before the minimum age", got)
	}
	h.clock.Step(time.Nanosecond)
	h.collect(t)
	if got := h.rt.containerIDs(); len(got) != 0 {
		t.Errorf("containers left %v at the minimum age", got)
	}
}

// A container in an unknown state may be running: it is stopped with its pod's grace period first.
func TestUnknownStateIsStoppedFirst(t *testing.T) {
	h := newHarness(t, defaultPolicy)
	id := h.rt.container("gone", "app", 0, time.Minute, unknown)
	h.rt.containers[id].Annotations["io.kubernetes.pod.terminationGracePeriod"] = "30"
	id2 := h.rt.container("gone", "web", 0, time.Minute, unknown)
	h.rt.containers[id2].Annotations["io.kubernetes.pod.terminationGracePeriod"] = "0"
	h.collect(t)
	want := []string{"StopContainer gone-app-0 30", "RemoveContainer gone-app-0", "StopContainer gone-web-0 2", "RemoveContainer gone-web-0"}
	if got := h.rt.callList(); !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
}

func TestStopTimeout(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		want        int64
	}{
		{nil, 2},
		{map[string]string{"io.kubernetes.pod.terminationGracePeriod": "45"}, 45},
		{map[string]string{"io.kubernetes.pod.terminationGracePeriod": "45", "io.kubernetes.pod.deletionGracePeriod": "5"}, 5},
		{map[string]string{"io.kubernetes.pod.deletionGracePeriod": "0"}, 2},
		{map[string]string{"io.kubernetes.pod.terminationGracePeriod": "soon"}, 2},
	} {
		if got := stopTimeout(tc.annotations); got != tc.want {
			t.Errorf("stopTimeout(%v) = %d, want %d", tc.annotations, got, tc.want)
		}
	}
}

func TestSandboxSelection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pods  map[types.UID]bool
		ready bool
		setup func(rt *fakeRuntime)
		want  []string
	}{
		{"active pod: the newest sandbox stays, older ones without containers go", map[types.UID]bool{"a": false}, true,
			func(rt *fakeRuntime) {
				rt.sandbox("a", 0, 3*time.Hour, notReady)
				rt.sandbox("a", 1, 2*time.Hour, notReady)
				rt.sandbox("a", 2, time.Hour, ready)
			}, []string{"sb-a-2"}},
		{"active pod: a newest sandbox that is not ready stays too", map[types.UID]bool{"a": false}, true,
			func(rt *fakeRuntime) {
				rt.sandbox("a", 0, 3*time.Hour, notReady)
				rt.sandbox("a", 1, 2*time.Hour, notReady)
			}, []string{"sb-a-1"}},
		{"an old sandbox holding a kept container stays", map[types.UID]bool{"a": false}, true,
			func(rt *fakeRuntime) {
				rt.sandbox("a", 0, 3*time.Hour, notReady)
				rt.containerIn("sb-a-0", "a", "app", 0, 3*time.Hour, exited)
				rt.sandbox("a", 1, time.Hour, ready)
			}, []string{"sb-a-0", "sb-a-1"}},
		{"deleted pod: every sandbox that is not ready goes once its containers are gone", map[types.UID]bool{}, true,
			func(rt *fakeRuntime) {
				rt.sandbox("gone", 0, 3*time.Hour, notReady)
				rt.sandbox("gone", 1, time.Hour, notReady)
				rt.containerIn("sb-gone-1", "gone", "app", 0, time.Hour, exited)
			}, nil},
		{"deleted pod: a ready sandbox stays", map[types.UID]bool{}, true,
			func(rt *fakeRuntime) { rt.sandbox("gone", 0, time.Hour, ready) }, []string{"sb-gone-0"}},
		{"deleted pod: a sandbox with a running container stays", map[types.UID]bool{}, true,
			func(rt *fakeRuntime) {
				rt.sandbox("gone", 0, time.Hour, notReady)
				rt.containerIn("sb-gone-0", "gone", "app", 0, time.Hour, running)
			}, []string{"sb-gone-0"}},
		{"unknown pod before the sources are ready: its newest sandbox stays", map[types.UID]bool{}, false,
			func(rt *fakeRuntime) {
				rt.sandbox("gone", 0, 3*time.Hour, notReady)
				rt.sandbox("gone", 1, time.Hour, notReady)
			}, []string{"sb-gone-1"}},
		{"busy pod: nothing is touched", map[types.UID]bool{"a": true}, true,
			func(rt *fakeRuntime) {
				rt.sandbox("a", 0, 3*time.Hour, notReady)
				rt.sandbox("a", 1, time.Hour, notReady)
			}, []string{"sb-a-0", "sb-a-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, defaultPolicy)
			h.pods.pods, h.pods.ready = tc.pods, tc.ready
			tc.setup(h.rt)
			h.collect(t)
			if got := h.rt.sandboxIDs(); !slices.Equal(got, tc.want) {
				t.Errorf("sandboxes left %v, want %v", got, tc.want)
			}
			for _, c := range h.rt.callList() {
				if id, ok := strings.CutPrefix(c, "RemovePodSandbox "); ok && !slices.Contains(h.rt.callList(), "StopPodSandbox "+id) {
					t.Errorf("sandbox %s removed without being stopped first", id)
				}
			}
		})
	}
}

// A pass that cannot list the runtime fails, and says why.
func TestListFailure(t *testing.T) {
	h := newHarness(t, defaultPolicy)
	h.rt.listErr = errors.New("runtime is down")
	err := h.c.GarbageCollect(t.Context())
	if err == nil || !strings.Contains(err.Error(), "list containers: runtime is down") {
		t.Errorf("GarbageCollect = %v, want the listing error", err)
	}
}
