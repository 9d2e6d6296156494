package probes

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestLivenessFailureThreshold: the container fails on the third failure in a row, not before; each
// failure is an Unhealthy event on the container; OnChange fires once, on the flip.
func TestLivenessFailureThreshold(t *testing.T) {
	tests := []struct {
		name        string
		policy      corev1.RestartPolicy
		grace       *int64
		wantMessage string
	}{
		{"restarted", corev1.RestartPolicyAlways, nil, "Container app failed liveness probe, will be restarted"},
		{"probe grace period", corev1.RestartPolicyOnFailure, ptr.To[int64](5), "Container app failed liveness probe, will be restarted"},
		{"never restarted", corev1.RestartPolicyNever, nil, "Container app failed liveness probe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			probe := execProbe("live", 3, 1)
			probe.TerminationGracePeriodSeconds = tt.grace
			pod := newPod(probe, nil, nil)
			pod.Spec.RestartPolicy = tt.policy
			h.exec.set("live", 1, "boom")
			gate := h.exec.gated("live")
			h.m.Sync(pod, []string{"10.88.0.5"}, []ContainerInfo{running("app", "c1")})

			for i := 1; i <= 3; i++ {
				if i > 1 {
					h.step(10 * time.Second)
				}
				eventually(t, "liveness probe to run", func() bool { return h.exec.calls("live") == i })
				// The worker is inside probe i, so probes before it are fully processed.
				if failed, _, _ := h.m.LivenessFailed("c1"); failed {
					t.Fatalf("failed after %d failures, want only after 3", i-1)
				}
				if n := h.changeCount(); n != 0 {
					t.Fatalf("OnChange called %d times before the threshold", n)
				}
				gate <- struct{}{}
			}
			eventually(t, "liveness failure", func() bool { failed, _, _ := h.m.LivenessFailed("c1"); return failed })
			_, msg, grace := h.m.LivenessFailed("c1")
			if msg != tt.wantMessage {
				t.Errorf("message = %q, want %q", msg, tt.wantMessage)
			}
			if !equalPtr(grace, tt.grace) {
				t.Errorf("grace period = %v, want %v", grace, tt.grace)
			}
			eventually(t, "one OnChange", func() bool { return h.changeCount() == 1 })
			if h.changes[0] != podKey {
				t.Errorf("OnChange key = %v, want %v", h.changes[0], podKey)
			}
			assertEvents(t, h.rec, 3, "Liveness probe failed: boom")
			if ready, known := h.m.Ready("c1"); !ready || !known {
				t.Errorf("Ready = %v, %v; a container without readiness probe is ready", ready, known)
			}
		})
	}
}

// assertEvents checks that n Unhealthy warnings with message were recorded on container app.
func assertEvents(t *testing.T, rec *fakeRecorder, n int, message string) {
	t.Helper()
	eventually(t, "events", func() bool { return len(rec.list()) >= n })
	events := rec.list()
	if len(events) != n {
		t.Fatalf("events = %v, want %d", rec.messages(), n)
	}
	for _, e := range events {
		if e.eventtype != corev1.EventTypeWarning || e.reason != "Unhealthy" || e.message != message {
			t.Errorf("event = %s %s %q, want Warning Unhealthy %q", e.eventtype, e.reason, e.message, message)
		}
		want := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "web", UID: "uid-1",
			ResourceVersion: "7", FieldPath: "spec.containers{app}"}
		if e.ref == nil || *e.ref != want {
			t.Errorf("event object = %+v, want %+v", e.ref, want)
		}
	}
}

func equalPtr(a, b *int64) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// TestReadinessThresholds: readiness starts not ready, needs successThreshold successes to become ready
// and failureThreshold failures to become unready again; OnChange only on the flips.
func TestReadinessThresholds(t *testing.T) {
	h := newHarness(t)
	h.exec.set("ready", 0, "")
	gate := h.exec.gated("ready")
	h.m.Sync(newPod(nil, execProbe("ready", 1, 2), nil), nil, []ContainerInfo{running("app", "c1")})

	eventually(t, "first readiness probe", func() bool { return h.exec.calls("ready") == 1 })
	if ready, known := h.m.Ready("c1"); ready || known {
		t.Fatalf("Ready before any result = %v, %v; want false, false", ready, known)
	}
	gate <- struct{}{}
	h.step(10 * time.Second)
	eventually(t, "second readiness probe", func() bool { return h.exec.calls("ready") == 2 })
	if ready, _ := h.m.Ready("c1"); ready {
		t.Fatal("ready after one success, successThreshold is 2")
	}
	if n := h.changeCount(); n != 0 {
		t.Fatalf("OnChange called %d times before the threshold", n)
	}
	gate <- struct{}{}
	eventually(t, "ready", func() bool { ready, known := h.m.Ready("c1"); return ready && known })
	eventually(t, "OnChange for ready", func() bool { return h.changeCount() == 1 })

	h.exec.set("ready", 1, "not yet")
	h.step(10 * time.Second)
	eventually(t, "third readiness probe", func() bool { return h.exec.calls("ready") == 3 })
	gate <- struct{}{}
	eventually(t, "unready", func() bool { ready, known := h.m.Ready("c1"); return !ready && known })
	eventually(t, "OnChange for unready", func() bool { return h.changeCount() == 2 })
	eventually(t, "event", func() bool { return len(h.rec.list()) == 1 })
	if got := h.rec.list()[0]; got.message != "Readiness probe failed: not yet" || got.reason != "Unhealthy" {
		t.Errorf("event = %s %q, want Unhealthy %q", got.reason, got.message, "Readiness probe failed: not yet")
	}
}

// TestReadinessFailingFromStartIsNoFlip: a readiness probe that fails from the start never flips
// (readiness starts as failure), so OnChange is not called.
func TestReadinessFailingFromStartIsNoFlip(t *testing.T) {
	h := newHarness(t)
	h.exec.set("ready", 1, "")
	gate := h.exec.gated("ready")
	h.m.Sync(newPod(nil, execProbe("ready", 1, 1), nil), nil, []ContainerInfo{running("app", "c1")})
	eventually(t, "first probe", func() bool { return h.exec.calls("ready") == 1 })
	gate <- struct{}{}
	h.step(10 * time.Second)
	eventually(t, "second probe", func() bool { return h.exec.calls("ready") == 2 })
	if ready, known := h.m.Ready("c1"); ready || !known {
		t.Errorf("Ready = %v, %v; want false, true", ready, known)
	}
	if n := h.changeCount(); n != 0 {
		t.Errorf("OnChange called %d times, want 0", n)
	}
	gate <- struct{}{}
}

// TestInitialDelay: the first probe runs initialDelaySeconds after the container started, however long
// ago that was when the worker began.
func TestInitialDelay(t *testing.T) {
	tests := []struct {
		name         string
		delay        int32
		startedAgo   time.Duration
		wantWaitFor  time.Duration
		wantAtStartT bool
	}{
		{"no delay", 0, 0, 0, true},
		{"delay from now", 5, 0, 5 * time.Second, false},
		{"delay partly over", 5, 3 * time.Second, 2 * time.Second, false},
		{"delay over", 5, 10 * time.Second, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			probe := execProbe("ready", 1, 1)
			probe.InitialDelaySeconds = tt.delay
			c := running("app", "c1")
			c.StartedAt = t0.Add(-tt.startedAgo)
			h.m.Sync(newPod(nil, probe, nil), nil, []ContainerInfo{c})
			if tt.wantWaitFor > 0 {
				eventually(t, "the worker to wait", h.clock.HasWaiters)
				h.step(tt.wantWaitFor - time.Second)
				if h.clock.Waiters() != 1 || h.exec.calls("ready") != 0 {
					t.Fatalf("probed %d times a second before the initial delay ended", h.exec.calls("ready"))
				}
				h.step(time.Second)
			}
			eventually(t, "the first probe", func() bool { return h.exec.calls("ready") == 1 })
			eventually(t, "ready", func() bool { ready, _ := h.m.Ready("c1"); return ready })
		})
	}
}

// TestStartupGatesLivenessAndReadiness: liveness and readiness do not run before the startup probe
// succeeds; then they run at once.
func TestStartupGatesLivenessAndReadiness(t *testing.T) {
	h := newHarness(t)
	h.exec.set("start", 1, "starting")
	startGate := h.exec.gated("start")
	var early []string
	h.exec.onCall = func(id string, cmd []string) {
		if cmd[0] != "start" {
			if started, _ := h.m.Started(id); !started {
				early = append(early, cmd[0])
			}
		}
	}
	pod := newPod(execProbe("live", 3, 1), execProbe("ready", 3, 1), execProbe("start", 30, 1))
	h.m.Sync(pod, nil, []ContainerInfo{running("app", "c1")})

	eventually(t, "first startup probe", func() bool { return h.exec.calls("start") == 1 })
	if started, known := h.m.Started("c1"); started || known {
		t.Errorf("Started before a result = %v, %v; want false, false", started, known)
	}
	if ready, known := h.m.Ready("c1"); ready || known {
		t.Errorf("Ready before started = %v, %v; want false, false", ready, known)
	}
	startGate <- struct{}{}
	eventually(t, "startup failure event", func() bool { return len(h.rec.list()) == 1 })
	h.exec.set("start", 0, "")
	h.step(10 * time.Second)
	eventually(t, "second startup probe", func() bool { return h.exec.calls("start") == 2 })
	if h.exec.calls("live")+h.exec.calls("ready") != 0 {
		t.Fatal("liveness or readiness probed before the container started")
	}
	startGate <- struct{}{}
	eventually(t, "started", func() bool { started, known := h.m.Started("c1"); return started && known })
	eventually(t, "liveness and readiness to run", func() bool {
		return h.exec.calls("live") >= 1 && h.exec.calls("ready") >= 1
	})
	eventually(t, "ready", func() bool { ready, _ := h.m.Ready("c1"); return ready })
	eventually(t, "OnChange for started and ready", func() bool { return h.changeCount() == 2 })
	if len(early) != 0 {
		t.Errorf("probes %v ran before the container started", early)
	}
	if n := len(h.rec.list()); n != 1 {
		t.Errorf("events = %v, want one startup failure", h.rec.messages())
	}
}

// TestStartupFailure: a startup probe reaching failureThreshold kills the container, with the startup
// probe's grace period.
func TestStartupFailure(t *testing.T) {
	h := newHarness(t)
	h.exec.set("start", 1, "no")
	probe := execProbe("start", 1, 1)
	probe.TerminationGracePeriodSeconds = ptr.To[int64](3)
	h.m.Sync(newPod(execProbe("live", 1, 1), nil, probe), nil, []ContainerInfo{running("app", "c1")})
	eventually(t, "startup failure", func() bool { failed, _, _ := h.m.LivenessFailed("c1"); return failed })
	_, msg, grace := h.m.LivenessFailed("c1")
	if msg != "Container app failed startup probe, will be restarted" || grace == nil || *grace != 3 {
		t.Errorf("LivenessFailed = %q, %v", msg, grace)
	}
	if started, known := h.m.Started("c1"); started || !known {
		t.Errorf("Started = %v, %v; want false, true", started, known)
	}
	eventually(t, "OnChange", func() bool { return h.changeCount() == 1 })
	eventually(t, "event", func() bool { return slices.Contains(h.rec.messages(), "Startup probe failed: no") })
	if h.exec.calls("live") != 0 {
		t.Error("liveness probed although the container never started")
	}
}

// TestDefaultsWithoutProbes: containers without probes are started and ready while running; unknown and
// stopped containers are not.
func TestDefaultsWithoutProbes(t *testing.T) {
	h := newHarness(t)
	pod := newPod(nil, nil, nil)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "done"})
	h.m.Sync(pod, nil, []ContainerInfo{running("app", "c1"), {Name: "done", ID: "c2", StartedAt: t0}})
	tests := []struct {
		id                   string
		ready, started, know bool
	}{
		{"c1", true, true, true},
		{"c2", false, false, false},
		{"unknown", false, false, false},
	}
	for _, tt := range tests {
		ready, rk := h.m.Ready(tt.id)
		started, sk := h.m.Started(tt.id)
		if ready != tt.ready || started != tt.started || rk != tt.know || sk != tt.know {
			t.Errorf("%s: Ready = %v, %v; Started = %v, %v", tt.id, ready, rk, started, sk)
		}
		if failed, _, _ := h.m.LivenessFailed(tt.id); failed {
			t.Errorf("%s: LivenessFailed", tt.id)
		}
	}
	if n := len(h.workers()); n != 0 {
		t.Errorf("%d workers for a pod without probes", n)
	}
}

// TestRestartDropsResults: a new container ID gets new workers and fresh results; the old attempt's
// results are dropped and its workers exit.
func TestRestartDropsResults(t *testing.T) {
	h := newHarness(t)
	h.exec.set("live", 1, "dead")
	pod := newPod(execProbe("live", 1, 1), execProbe("ready", 1, 1), nil)
	h.m.Sync(pod, nil, []ContainerInfo{running("app", "c1")})
	eventually(t, "liveness failure", func() bool { failed, _, _ := h.m.LivenessFailed("c1"); return failed })
	eventually(t, "ready", func() bool { ready, _ := h.m.Ready("c1"); return ready })
	old := h.worker(pod.UID, "app", liveness)

	h.exec.set("live", 0, "")
	h.m.Sync(pod, nil, []ContainerInfo{running("app", "c2")})
	waitDone(t, old)
	if failed, _, _ := h.m.LivenessFailed("c1"); failed {
		t.Error("old attempt's liveness failure kept")
	}
	if ready, known := h.m.Ready("c1"); ready || known {
		t.Errorf("old attempt's readiness kept: %v, %v", ready, known)
	}
	eventually(t, "probes of the new attempt", func() bool { return slices.Contains(h.exec.ids("live"), "c2") })
	eventually(t, "new attempt ready", func() bool { ready, _ := h.m.Ready("c2"); return ready })
	if failed, _, _ := h.m.LivenessFailed("c2"); failed {
		t.Error("new attempt inherited the liveness failure")
	}
	if w := h.worker(pod.UID, "app", liveness); w == nil || w.containerID != "c2" {
		t.Errorf("liveness worker = %+v, want one for c2", w)
	}
}

// TestSyncKeepsWorkers: syncing the same attempt again neither restarts workers nor resets results.
func TestSyncKeepsWorkers(t *testing.T) {
	h := newHarness(t)
	pod := newPod(nil, execProbe("ready", 1, 1), nil)
	h.m.Sync(pod, nil, []ContainerInfo{running("app", "c1")})
	eventually(t, "ready", func() bool { ready, _ := h.m.Ready("c1"); return ready })
	w := h.worker(pod.UID, "app", readiness)
	h.m.Sync(pod, nil, []ContainerInfo{running("app", "c1")})
	if h.worker(pod.UID, "app", readiness) != w {
		t.Error("worker replaced on a sync of the same attempt")
	}
	if ready, _ := h.m.Ready("c1"); !ready {
		t.Error("readiness reset on a sync of the same attempt")
	}
	h.m.Sync(pod, nil, []ContainerInfo{{Name: "app", ID: "c1", StartedAt: t0}})
	waitDone(t, w)
	if ready, known := h.m.Ready("c1"); ready || known {
		t.Errorf("exited container: Ready = %v, %v", ready, known)
	}
}

// TestDeletionStopsLivenessAndStartup: once the pod is being deleted, liveness and startup stop and no
// longer ask for a restart; readiness keeps probing.
func TestDeletionStopsLivenessAndStartup(t *testing.T) {
	h := newHarness(t)
	h.exec.set("live", 1, "")
	pod := newPod(execProbe("live", 1, 1), execProbe("ready", 1, 1), nil)
	h.m.Sync(pod, nil, []ContainerInfo{running("app", "c1")})
	eventually(t, "liveness failure", func() bool { failed, _, _ := h.m.LivenessFailed("c1"); return failed })
	live := h.worker(pod.UID, "app", liveness)

	deleting := pod.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	h.m.Sync(deleting, nil, []ContainerInfo{running("app", "c1")})
	waitDone(t, live)
	if failed, _, _ := h.m.LivenessFailed("c1"); failed {
		t.Error("liveness failure reported for a pod being deleted")
	}
	if h.worker(pod.UID, "app", readiness) == nil {
		t.Error("readiness stopped while the pod terminates")
	}
}

// TestOneProbeDoesNotBlockAnother: a hung exec probe holds neither other probes nor Sync; RemovePod stops
// it.
func TestOneProbeDoesNotBlockAnother(t *testing.T) {
	h := newHarness(t)
	h.exec.gated("hang")
	pod := newPod(execProbe("hang", 1, 1), nil, nil)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "side", ReadinessProbe: execProbe("ready", 1, 1)})
	h.m.Sync(pod, nil, []ContainerInfo{running("app", "c1"), running("side", "c2")})
	eventually(t, "hung probe", func() bool { return h.exec.calls("hang") == 1 })
	eventually(t, "other container ready", func() bool { ready, _ := h.m.Ready("c2"); return ready })

	ws := h.workers()
	h.m.RemovePod(pod.UID)
	for _, w := range ws {
		waitDone(t, w)
	}
	if ready, known := h.m.Ready("c2"); ready || known {
		t.Errorf("results kept after RemovePod: %v, %v", ready, known)
	}
	if len(h.rec.list()) != 0 {
		t.Errorf("events for a stopped probe: %v", h.rec.messages())
	}
}

// TestExecProbeCommand: the command is expanded with the container's literal env and run with the probe's
// timeout in the container of the attempt.
func TestExecProbeCommand(t *testing.T) {
	h := newHarness(t)
	probe := execProbe("check", 1, 1)
	probe.Exec.Command = []string{"check", "$(PORT)", "$(SECRET)"}
	probe.TimeoutSeconds = 4
	pod := newPod(nil, probe, nil)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PORT", Value: "8080"},
		{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{}}}
	var got []string
	h.exec.onCall = func(_ string, cmd []string) { got = cmd }
	h.m.Sync(pod, nil, []ContainerInfo{running("app", "c1")})
	eventually(t, "ready", func() bool { ready, _ := h.m.Ready("c1"); return ready })
	h.exec.mu.Lock()
	defer h.exec.mu.Unlock()
	if want := []string{"check", "8080", "$(SECRET)"}; !slices.Equal(got, want) {
		t.Errorf("command = %q, want %q", got, want)
	}
	if s := h.exec.scripts["check"]; s.timeout != 4*time.Second || s.ids[0] != "c1" {
		t.Errorf("ran in %v with timeout %v, want c1 and 4s", s.ids, s.timeout)
	}
}
