package imagegc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/logtest"
)

// started runs h's Manager until the test ends; each pass is reported on the returned channel.
func started(t *testing.T, h *harness, ctx context.Context) <-chan struct{} {
	t.Helper()
	passes := make(chan struct{}, 16)
	h.m.passDone = func() { passes <- struct{}{} }
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start returned %v", err)
		}
	})
	return passes
}

func wait(t *testing.T, passes <-chan struct{}) {
	t.Helper()
	select {
	case <-passes:
	case <-time.After(30 * time.Second):
		t.Fatal("no garbage collection pass")
	}
}

// step moves the fake clock on by d. Start makes its ticker before its first pass, so after a pass has
// been reported the ticker is there.
func step(t *testing.T, h *harness, d time.Duration) {
	t.Helper()
	if !h.clock.HasWaiters() {
		t.Fatal("Start does not wait on its ticker")
	}
	h.clock.Step(d)
}

func TestStartCollectsAtOnceAndEveryPeriod(t *testing.T) {
	ready := make(chan struct{})
	h := newHarness(t, Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute},
		func(o *Options) { o.Ready = ready })
	h.fs.capacity, h.fs.available = 1000, 100
	h.rt.addImage("a", 150)
	passes := started(t, h, context.Background())
	if h.rt.listCalls() != 0 {
		t.Fatal("a pass ran before the runtime was ready")
	}
	close(ready)
	wait(t, passes) // t0: detected, too young to go
	if got := h.rt.removedNames(); len(got) > 0 {
		t.Fatalf("removed %v at start", got)
	}
	step(t, h, ImageGCPeriod)
	wait(t, passes) // t0+5m: past imageMinimumGCAge
	if got := h.rt.removedNames(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("removed %v after one period, want a", got)
	}
}

// TestStartFailures: the first failed pass is only logged, a repeated failure is an ImageGCFailed event,
// as in the kubelet.
func TestStartFailures(t *testing.T) {
	h := newHarness(t, defaultPolicy())
	h.rt.listErr = errors.New("runtime unavailable")
	logs := &logtest.Sink{}
	passes := started(t, h, logr.NewContext(context.Background(), logs.Logger()))
	wait(t, passes)
	if events := h.drainEvents(); len(events) > 0 {
		t.Fatalf("events %q after one failure", events)
	}
	if !logs.Has("Image garbage collection failed once. Stats initialization may not have completed yet") {
		t.Error("first failure not logged as the kubelet does")
	}
	step(t, h, ImageGCPeriod)
	wait(t, passes)
	if events := h.drainEvents(); len(events) != 1 || events[0] != "Warning ImageGCFailed runtime unavailable" {
		t.Fatalf("events %q, want one ImageGCFailed", events)
	}
	if !logs.Has("Image garbage collection failed multiple times in a row") {
		t.Error("repeated failure not logged as the kubelet does")
	}
	h.rt.mu.Lock()
	h.rt.listErr = nil
	h.rt.mu.Unlock()
	step(t, h, ImageGCPeriod)
	wait(t, passes)
	if events := h.drainEvents(); len(events) > 0 {
		t.Fatalf("events %q after a successful pass", events)
	}
	if !logs.Has("Image garbage collection succeeded") {
		t.Error("recovery not logged")
	}
}

func TestStartDisabled(t *testing.T) {
	cases := []struct {
		name    string
		p       Policy
		enabled bool
	}{
		{"high 100 and no maximum age", Policy{HighThresholdPercent: 100, LowThresholdPercent: 80}, false},
		{"high 100 with a maximum age", Policy{HighThresholdPercent: 100, LowThresholdPercent: 80, MaxAge: time.Hour}, true},
		{"defaults", defaultPolicy(), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.p)
			if h.m.Enabled() != tc.enabled {
				t.Fatalf("Enabled = %v, want %v", h.m.Enabled(), tc.enabled)
			}
			if tc.enabled {
				wait(t, started(t, h, context.Background()))
				return
			}
			if err := h.m.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			if h.rt.listCalls() != 0 {
				t.Error("a disabled collector listed images")
			}
		})
	}
}

// TestStartMaximumAgeCountsFromStart: imageMaximumGCAge is measured from when Start began, so an image
// unused for ages is kept until the Manager itself has run that long.
func TestStartMaximumAgeCountsFromStart(t *testing.T) {
	h := newHarness(t, Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: time.Minute, MaxAge: 7 * time.Minute})
	h.rt.addImage("old", 10)
	h.rt.addImage("used", 10)
	h.rt.use("used", runtimeapi.ContainerState_CONTAINER_RUNNING)
	passes := started(t, h, context.Background())
	wait(t, passes) // t0
	step(t, h, ImageGCPeriod)
	wait(t, passes) // t0+5m: not yet 7 minutes since the start
	if got := h.rt.removedNames(); len(got) > 0 {
		t.Fatalf("removed %v before imageMaximumGCAge since the start", got)
	}
	step(t, h, ImageGCPeriod)
	wait(t, passes) // t0+10m
	if got := h.rt.removedNames(); len(got) != 1 || got[0] != "old" {
		t.Fatalf("removed %v, want the unused image", got)
	}
	if got := h.collected(ReasonAge); got != 1 {
		t.Errorf("age count = %v, want 1", got)
	}
}
