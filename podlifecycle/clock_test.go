package podlifecycle

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/runtime/fake"
)

// The lifecycle's timing on the fake clock: what must not happen within a period is checked by moving the
// clock past it and syncing, not by watching the wall clock for a while.

// A restartPolicy Never pod ends in the phase its exit code says, and its container is never started
// again, however long after.
func TestNeverPodIsNotRestartedAfterItsExit(t *testing.T) {
	for _, tt := range []struct {
		code   int32
		phase  corev1.PodPhase
		reason string
	}{
		{0, corev1.PodSucceeded, "Completed"},
		{3, corev1.PodFailed, "Error"},
	} {
		t.Run(string(tt.phase), func(t *testing.T) {
			b := newLifecycleBed(t)
			b.create(bedPod("job", func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }))
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

// A shorter grace period takes effect at once: a container that ignores SIGTERM is still running a minute
// into the 300 s it was given, and is killed 2 s (the minimum stop timeout) after the deletion is
// shortened to 1 s, not at the end of the first grace period; the pod is then removed from the API.
func TestShorterGracePeriodTakesEffectAtOnce(t *testing.T) {
	b := newLifecycleBed(t)
	b.rt.ScriptContainer("stubborn", fake.Behaviour{IgnoreSIGTERM: true})
	b.create(bedPod("slow", func(p *corev1.Pod) {
		p.Spec.Containers[0].Name = "stubborn"
		p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(300))
	}))
	b.sync("slow")
	b.mustRun("slow", "stubborn")

	b.deleteWithGrace("slow", 300)
	b.sync("slow")
	b.waitFor("the stop to wait on the clock", b.clk.HasWaiters)
	b.step(time.Minute)
	b.sync("slow")
	b.mustRun("slow", "stubborn") // 4 min of its grace period left

	b.deleteWithGrace("slow", 1)
	b.sync("slow")
	// The new stop's timer may not be set yet when the clock moves: move it in small steps.
	var waited time.Duration
	for b.running("slow", "stubborn") != "" {
		if waited > 5*time.Second {
			t.Fatalf("still running %v after the grace period was shortened to 1 s", waited)
		}
		b.step(100 * time.Millisecond)
		waited += 100 * time.Millisecond
		time.Sleep(time.Millisecond)
	}
	if waited < 2*time.Second {
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
