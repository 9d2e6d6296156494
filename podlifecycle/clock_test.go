package podlifecycle

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// The lifecycle's timing on the fake clock: what must not happen within a period is checked by moving the
// clock past it and syncing, not by watching the wall clock for a while.

// A restartPolicy Never pod (or container) ends in the phase its exit code says, and its container is
// never started again, however long after.
func TestNeverPodIsNotRestartedAfterItsExit(t *testing.T) {
	never := func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }
	containerNever := func(p *corev1.Pod) { p.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever) }
	for _, tt := range []struct {
		name   string
		policy func(*corev1.Pod)
		code   int32
		phase  corev1.PodPhase
		reason string
	}{
		{"Never pod, exit 0", never, 0, corev1.PodSucceeded, "Completed"},
		{"Never pod, exit 3", never, 3, corev1.PodFailed, "Error"},
		{"Never container in an Always pod, exit 1", containerNever, 1, corev1.PodFailed, "Error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newLifecycleBed(t)
			b.create(bedPod("job", tt.policy))
			b.sync("job")
			b.exit("job", "app", tt.code)
			for range 3 {
				b.sync("job")
				b.step(10 * time.Minute) // past any back-off
			}
			st := b.pod("job").Status
			if st.Phase != tt.phase || len(st.ContainerStatuses) != 1 {
				t.Fatalf("phase %s with %d container statuses, want %s", st.Phase, len(st.ContainerStatuses), tt.phase)
			}
			if term := st.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != tt.code || term.Reason != tt.reason {
				t.Errorf("terminated %+v, want exit code %d, reason %s", term, tt.code, tt.reason)
			}
			if n := len(b.containers("job")); n != 1 {
				t.Errorf("%d containers, want the one that exited", n)
			}
			if n := len(b.calls("StartContainer")); n != 1 {
				t.Errorf("StartContainer called %d times, want once", n)
			}
		})
	}
}

// A crashing container restarts at once the first time, then waits out the back-off (10 s): not a
// moment earlier, and restarts as soon as it is over.
func TestCrashLoopBackOffOnTheClock(t *testing.T) {
	b := newLifecycleBed(t)
	b.create(bedPod("crash"))
	b.sync("crash")
	b.exit("crash", "app", 1)
	b.sync("crash")
	b.exit("crash", "app", 1) // attempt 1, at once after the first exit
	res := b.sync("crash")
	if res.RequeueAfter <= 0 || res.RequeueAfter > 10*time.Second {
		t.Errorf("requeue after %v, want the back-off (10 s)", res.RequeueAfter)
	}
	cs := b.pod("crash").Status.ContainerStatuses[0]
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || cs.RestartCount != 1 {
		t.Fatalf("container status %+v, want waiting in CrashLoopBackOff after 1 restart", cs)
	}
	b.step(9 * time.Second)
	b.sync("crash")
	if n := len(b.calls("StartContainer")); n != 2 {
		t.Fatalf("StartContainer called %d times within the back-off, want 2", n)
	}
	b.step(time.Second)
	b.sync("crash")
	b.mustRun("crash", "app")
	if n := len(b.calls("StartContainer")); n != 3 {
		t.Errorf("StartContainer called %d times after the back-off, want 3", n)
	}
}

// With imagePullPolicy Always every restart pulls, in the background: the back-off must step once per
// restart, as the kubelet's (which pulls within the sync), so the first restart still comes at once and the
// second after 10 s — not 10 s and 20 s later because the pull made each restart count twice.
func TestCrashLoopBackOffWithPullAlways(t *testing.T) {
	b := newLifecycleBed(t)
	b.rt.SetPullable("docker.io/library/busybox:latest", 1<<20)
	b.create(bedPod("crash", func(p *corev1.Pod) { p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways }))
	pulledAndStarted := func(starts int) {
		t.Helper()
		for i := 0; len(b.calls("StartContainer")) < starts; i++ {
			if i > 1000 {
				t.Fatalf("StartContainer called %d times, want %d", len(b.calls("StartContainer")), starts)
			}
			b.sync("crash")
			time.Sleep(time.Millisecond) // the pull runs in a goroutine
		}
	}
	pulledAndStarted(1)
	b.exit("crash", "app", 1)
	pulledAndStarted(2) // at once: no back-off before the first restart, however long the pull
	b.exit("crash", "app", 1)
	b.sync("crash")
	b.step(9 * time.Second)
	b.sync("crash")
	if n := len(b.calls("StartContainer")); n != 2 {
		t.Fatalf("StartContainer called %d times within the 10 s back-off, want 2", n)
	}
	b.step(time.Second)
	pulledAndStarted(3)
}

// A shorter grace period takes effect at once: a container that ignores SIGTERM is still running a minute
// into the 300 s it was given, and is killed 2 s (the minimum stop timeout) after the deletion is
// shortened to 1 s, not at the end of the first grace period; the pod is then removed from the API.
func TestShorterGracePeriodTakesEffectAtOnce(t *testing.T) {
	b := newLifecycleBed(t)
	b.runStubborn("slow")

	b.deleteWithGrace("slow", 300)
	b.sync("slow")
	b.waitFor("the stop to wait on the clock", b.clk.HasWaiters)
	b.step(time.Minute)
	b.sync("slow")
	b.mustRun("slow", "stubborn") // 4 min of its grace period left

	b.deleteWithGrace("slow", 1)
	b.sync("slow")
	if waited := b.stepUntilStopped("slow", "stubborn", 5*time.Second); waited < 2*time.Second {
		t.Errorf("killed after %v, want the minimum stop timeout (2 s) first", waited)
	}
	c := b.containers("slow")[0]
	if st, _ := b.cri.ContainerStatus(b.ctx, c.Id, false); st.GetStatus().GetExitCode() != 137 {
		t.Errorf("exit code %d, want 137 (SIGKILL)", st.GetStatus().GetExitCode())
	}
	b.waitKill("slow")
	b.sync("slow")
	if b.pod("slow") != nil {
		t.Error("pod still in the API after its containers stopped")
	}
}

// An agent restart (a new reconciler, which remembers nothing) adopts the running containers: nothing is
// created, started or stopped, and the restart count is kept.
func TestRestartedAgentAdoptsRunningContainers(t *testing.T) {
	b := newLifecycleBed(t)
	b.create(bedPod("keep"))
	b.sync("keep")
	b.exit("keep", "app", 1)
	b.sync("keep")
	second := b.mustRun("keep", "app")

	b.start()
	b.rt.ResetCalls()
	for range 3 {
		b.sync("keep")
		b.step(time.Minute)
	}
	if got := b.calls("RunPodSandbox", "CreateContainer", "StartContainer", "StopContainer", "StopPodSandbox"); len(got) > 0 {
		t.Errorf("the restarted agent called %s", strings.Join(got, ", "))
	}
	if id := b.mustRun("keep", "app"); id != second {
		t.Errorf("running container %s, want %s", id, second)
	}
	if cs := b.pod("keep").Status.ContainerStatuses[0]; cs.RestartCount != 1 || cs.State.Running == nil {
		t.Errorf("container status %+v, want running with restart count 1", cs)
	}
}

// activeDeadlineSeconds fails the pod once it has been active that long on the clock, not before, and
// stops its containers.
func TestActiveDeadlineOnTheClock(t *testing.T) {
	b := newLifecycleBed(t)
	b.create(bedPod("deadline", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To(int64(60)) }))
	res := b.sync("deadline")
	if res.RequeueAfter <= 0 || res.RequeueAfter > 60*time.Second {
		t.Errorf("requeue after %v, want at the deadline (60 s)", res.RequeueAfter)
	}
	b.step(59 * time.Second)
	b.sync("deadline")
	if p := b.pod("deadline"); p.Status.Phase != corev1.PodRunning {
		t.Fatalf("phase %s 1 s before the deadline, want Running", p.Status.Phase)
	}
	b.step(time.Second)
	b.sync("deadline")
	b.waitKill("deadline")
	b.sync("deadline")
	p := b.pod("deadline")
	if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "DeadlineExceeded" {
		t.Errorf("phase %s reason %q, want Failed DeadlineExceeded", p.Status.Phase, p.Status.Reason)
	}
	for _, c := range b.containers("deadline") {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s still runs", c.Metadata.Name)
		}
	}
}

// The upstream "Pods should support pod readiness gates" on the clock: Ready follows the gates' conditions,
// which the users set through pods/status, and no sync of the agent ever drops or rewrites them.
func TestReadinessGatesOnTheClock(t *testing.T) {
	const gate1, gate2 = corev1.PodConditionType("k8s.io/test-condition1"), corev1.PodConditionType("k8s.io/test-condition2")
	b := newLifecycleBed(t)
	b.create(bedPod("gated", func(p *corev1.Pod) {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate1}, {ConditionType: gate2}}
	}))
	setGate := func(gate corev1.PodConditionType, status corev1.ConditionStatus) {
		b.api.mutate("gated", func(p *corev1.Pod) {
			for i := range p.Status.Conditions {
				if p.Status.Conditions[i].Type == gate {
					p.Status.Conditions[i].Status = status
					return
				}
			}
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: gate, Status: status})
		})
	}
	expect := func(step string, want map[corev1.PodConditionType]corev1.ConditionStatus) {
		t.Helper()
		for range 3 { // and after later syncs, a resync period apart
			b.sync("gated")
			b.step(time.Minute)
		}
		conds := map[corev1.PodConditionType]corev1.ConditionStatus{}
		for _, c := range b.pod("gated").Status.Conditions {
			conds[c.Type] = c.Status
		}
		for typ, st := range want {
			if conds[typ] != st {
				t.Errorf("%s: %s is %q, want %q (conditions %v)", step, typ, conds[typ], st, conds)
			}
		}
	}
	expect("no gate set", map[corev1.PodConditionType]corev1.ConditionStatus{corev1.ContainersReady: corev1.ConditionTrue, corev1.PodReady: corev1.ConditionFalse})
	setGate(gate1, corev1.ConditionTrue)
	expect("one gate True", map[corev1.PodConditionType]corev1.ConditionStatus{gate1: corev1.ConditionTrue, corev1.PodReady: corev1.ConditionFalse})
	setGate(gate2, corev1.ConditionTrue)
	expect("both gates True", map[corev1.PodConditionType]corev1.ConditionStatus{gate1: corev1.ConditionTrue, gate2: corev1.ConditionTrue, corev1.PodReady: corev1.ConditionTrue})
	setGate(gate1, corev1.ConditionFalse)
	expect("one gate False again", map[corev1.PodConditionType]corev1.ConditionStatus{gate1: corev1.ConditionFalse, gate2: corev1.ConditionTrue, corev1.PodReady: corev1.ConditionFalse})
}

// An ephemeral container (kubectl debug) starts in the pod's sandbox and is never restarted after it
// exits, however long after; the pod's own container is untouched.
func TestEphemeralContainerIsNeverRestarted(t *testing.T) {
	b := newLifecycleBed(t)
	b.create(bedPod("debugged"))
	b.sync("debugged")
	app := b.mustRun("debugged", "app")
	b.api.mutate("debugged", func(p *corev1.Pod) {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox",
				ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile},
			TargetContainerName: "app"})
	})
	b.sync("debugged")
	b.exit("debugged", "debugger", 1)
	for range 3 {
		b.sync("debugged")
		b.step(10 * time.Minute)
	}
	var attempts int
	for _, c := range b.containers("debugged") {
		if c.Metadata.Name == "debugger" {
			attempts++
		}
	}
	if attempts != 1 {
		t.Errorf("%d attempts of the ephemeral container, want 1", attempts)
	}
	if st := b.pod("debugged").Status.EphemeralContainerStatuses; len(st) != 1 || st[0].State.Terminated == nil || st[0].State.Terminated.ExitCode != 1 {
		t.Errorf("ephemeral container statuses %+v, want one terminated with exit code 1", st)
	}
	if id := b.mustRun("debugged", "app"); id != app {
		t.Errorf("the pod's container %s was replaced by %s", app, id)
	}
}

// A pod force-deleted from the API and created again under its name (a new UID) starts at once, beside the
// old one still stopping, as with the kubelet: only a static pod waits for its predecessor.
func TestPodRecreatedUnderItsNameStartsBesideTheOldOne(t *testing.T) {
	b := newLifecycleBed(t)
	old := b.runStubborn("web")

	// Force-deleted (gone from the API at once), then created again with a new UID.
	b.create(bedPod("web", func(p *corev1.Pod) {
		p.UID = "web-uid-2"
		p.Spec.Containers[0].Name = "app"
	}))
	b.sync("web")
	b.mustRun("web", "app")
	if b.running("web", "stubborn") != old {
		t.Fatal("the old pod's container no longer runs: its stop did not take its grace period")
	}
}

// A pod found in the runtime that the (restarted) agent never knew and nothing desires any more — force-
// deleted while the agent was down — is stopped with a grace period of 1 s, as the kubelet stops orphaned
// runtime pods, not with the 300 s its spec once asked for.
func TestOrphanedRuntimePodIsStoppedWithAOneSecondGrace(t *testing.T) {
	b := newLifecycleBed(t)
	b.runStubborn("gone")

	b.start()
	if err := b.api.Delete(b.ctx, b.pod("gone")); err != nil {
		t.Fatal(err)
	}
	b.sync("gone")
	if waited := b.stepUntilStopped("gone", "stubborn", 5*time.Second); waited < 2*time.Second {
		t.Errorf("killed after %v, want the minimum stop timeout (2 s) first", waited)
	}
}
