package podlifecycle

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
)

// A container the runtime holds created and never started (the agent stopped between the two calls; here the
// start's call failed on the way) is started on the next sync, not made again: its restart count stays 0.
func TestACreatedContainerIsStartedNotMadeAgain(t *testing.T) {
	b := newLifecycleBed(t)
	b.rt.InjectErrorOnce("StartContainer", status.Error(codes.Unavailable, "runtime unavailable"))
	b.create(bedPod("web"))
	res := b.sync("web")
	if n := len(b.calls("CreateContainer")); n != 1 {
		t.Fatalf("%d CreateContainer calls, want 1", n)
	}
	b.step(res.RequeueAfter)
	b.sync("web")
	if n := len(b.calls("CreateContainer")); n != 1 {
		t.Errorf("%d CreateContainer calls after the retry, want still 1 (the created container started)", n)
	}
	if b.mustRun("web", "app") == "" {
		t.Fatal("the container does not run")
	}
	b.sync("web")
	p := b.pod("web")
	for _, cs := range p.Status.ContainerStatuses {
		if cs.RestartCount != 0 || cs.State.Running == nil {
			t.Errorf("container %s: restartCount %d, state %+v; want running, never restarted", cs.Name, cs.RestartCount, cs.State)
		}
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s", p.Status.Phase)
	}
}
