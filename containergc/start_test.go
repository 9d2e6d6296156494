package containergc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/logtest"
)

// started runs h's Collector until the test ends; each pass's result is reported on the returned channel.
func started(t *testing.T, h *harness, ctx context.Context) <-chan error {
	t.Helper()
	passes := make(chan error, 16)
	h.c.passDone = func(err error) { passes <- err }
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start returned %v", err)
		}
	})
	return passes
}

func wait(t *testing.T, passes <-chan error) error {
	t.Helper()
	select {
	case err := <-passes:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("no garbage collection pass")
		return nil
	}
}

// step moves the fake clock on by d once Start waits on its ticker (it makes it before its first pass).
func step(t *testing.T, h *harness, d time.Duration) {
	t.Helper()
	if !h.clock.HasWaiters() {
		t.Fatal("Start does not wait on its ticker")
	}
	h.clock.Step(d)
}

// Start waits for the runtime, collects at once, then every minute on the clock: not before.
func TestStartCollectsAtOnceAndEveryMinute(t *testing.T) {
	rdy := make(chan struct{})
	h := newHarness(t, defaultPolicy, func(o *Options) { o.Ready = rdy })
	h.pods.pods = map[types.UID]bool{"a": false}
	crashLoop(h.rt, "a", 3, running)
	passes := started(t, h, context.Background())
	if n := h.rt.listCount(); n != 0 || len(passes) != 0 {
		t.Fatalf("%d listings before the runtime answered", n)
	}
	close(rdy)
	if err := wait(t, passes); err != nil {
		t.Fatal(err)
	}
	if got := h.rt.containerIDs(); len(got) != 2 {
		t.Fatalf("containers after the first pass %v, want 2", got)
	}
	h.rt.container("a", "app", 3, -30*time.Second, exited) // the running one exits, two more attempts
	h.rt.containers["a-app-2"].State = exited
	h.rt.container("a", "app", 4, -40*time.Second, running)
	step(t, h, GCPeriod-time.Second) // the ticker does not fire: no pass
	if got := h.rt.containerIDs(); len(got) != 4 || len(passes) != 0 {
		t.Fatalf("containers %v before the period was over, want all four", got)
	}
	h.clock.Step(time.Second)
	if err := wait(t, passes); err != nil {
		t.Fatal(err)
	}
	if got := h.rt.containerIDs(); len(got) != 2 || got[0] != "a-app-3" || got[1] != "a-app-4" {
		t.Errorf("containers after the second pass %v, want a-app-3 and a-app-4", got)
	}
}

// A failed pass is logged and recorded as ContainerGCFailed on the Node each time; the first success after
// it is logged.
func TestStartFailures(t *testing.T) {
	h := newHarness(t, defaultPolicy)
	h.rt.listErr = errors.New("runtime is down")
	var sink logtest.Sink
	passes := started(t, h, logr.NewContext(context.Background(), sink.Logger()))
	for i := range 2 {
		if i > 0 {
			step(t, h, GCPeriod)
		}
		if err := wait(t, passes); err == nil {
			t.Fatal("a pass with the runtime down succeeded")
		}
		select {
		case e := <-h.events.Events:
			if !strings.HasPrefix(e, "Warning ContainerGCFailed ") || !strings.Contains(e, "runtime is down") {
				t.Errorf("event %q, want a ContainerGCFailed warning with the cause", e)
			}
		default:
			t.Error("no event for a failed pass")
		}
	}
	h.rt.mu.Lock()
	h.rt.listErr = nil
	h.rt.mu.Unlock()
	step(t, h, GCPeriod) // the next pass starts only once the runtime is back
	if err := wait(t, passes); err != nil {
		t.Fatal(err)
	}
	if !sink.Has("Container garbage collection failed") || !sink.Has("Container garbage collection succeeded") {
		t.Errorf("logged %v", sink.Messages())
	}
	if len(h.events.Events) != 0 {
		t.Errorf("an event for a pass that succeeded: %s", <-h.events.Events)
	}
}
