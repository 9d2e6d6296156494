package periodic

import (
	"context"
	"runtime"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestRunWaitsForReadyThenPassesEveryPeriod(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	ready := make(chan struct{})
	passes := make(chan time.Time, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Run(ctx, clk, ready, time.Minute, func(context.Context) { passes <- clk.Now() }) }()
	select {
	case <-passes:
		t.Fatal("a pass before ready")
	default:
	}
	close(ready)
	if at := <-passes; !at.Equal(time.Unix(0, 0)) {
		t.Errorf("first pass at %v, want at once", at)
	}
	for !clk.HasWaiters() { // the ticker is made before the first pass
		runtime.Gosched()
	}
	clk.Step(time.Minute)
	if at := <-passes; !at.Equal(time.Unix(60, 0)) {
		t.Errorf("second pass at %v, want one period later", at)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

func TestEveryPassesOnePeriodAfterTheCallThenEveryPeriod(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	passes := make(chan time.Time, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Every(ctx, clk, time.Minute, func(context.Context) { passes <- clk.Now() }) }()
	for !clk.HasWaiters() { // the ticker is made before any pass
		runtime.Gosched()
	}
	for _, want := range []time.Time{time.Unix(60, 0), time.Unix(120, 0)} {
		clk.Step(time.Minute)
		if at := <-passes; !at.Equal(want) {
			t.Errorf("pass at %v, want %v (none at once, then one a period)", at, want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Every = %v", err)
	}
	if len(passes) != 0 {
		t.Errorf("%d passes after the context ended", len(passes))
	}
}

func TestRunAndEveryReturnWhenTheContextEnds(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	never := make(chan struct{})
	pass := func(context.Context) { t.Error("a pass after the context ended") }
	if err := Run(ctx, clk, never, time.Minute, pass); err != nil {
		t.Errorf("Run before ready = %v", err)
	}
	if err := Every(ctx, clk, time.Minute, pass); err != nil {
		t.Errorf("Every = %v", err)
	}
}
