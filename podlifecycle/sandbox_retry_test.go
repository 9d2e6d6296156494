package podlifecycle

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A sandbox that cannot be made while the runtime is down is tried again at a delay that stops growing at the
// kubelet's 10 s: after the runtime was down for ten minutes, the pod gets its sandbox within 10 s of the
// runtime's return (an exponential back-off to 5 min left pods ContainerCreating for minutes).
func TestSandboxRetryStopsGrowingAtTenSeconds(t *testing.T) {
	b := newLifecycleBed(t)
	b.rt.InjectError("RunPodSandbox", status.Error(codes.Unavailable, "runtime unavailable"))
	b.create(bedPod("web"))
	var longest time.Duration
	for elapsed := time.Duration(0); elapsed < 10*time.Minute; {
		res := b.sync("web")
		if res.RequeueAfter <= 0 {
			t.Fatalf("no retry asked after a failed sandbox (after %v)", elapsed)
		}
		longest = max(longest, res.RequeueAfter)
		b.step(res.RequeueAfter)
		elapsed += res.RequeueAfter
	}
	if longest > 10*time.Second {
		t.Errorf("a failed sandbox waited up to %v before its next attempt, want at most 10s", longest)
	}
	b.rt.InjectError("RunPodSandbox", nil)
	b.step(10 * time.Second)
	b.sync("web")
	if n := len(b.calls("RunPodSandbox")); n == 0 {
		t.Fatal("no RunPodSandbox call")
	}
	if b.mustRun("web", "app") == "" {
		t.Fatal("the pod's container does not run 10 s after the runtime came back")
	}
}
