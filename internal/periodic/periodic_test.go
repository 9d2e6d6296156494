package periodic

import (
	"context"
	"runtime"
	"sync/atomic"
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

func TestRunTriggeredPassesAtOnceOnTriggerAndEveryPeriod(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	trigger := make(chan struct{}, 1)
	passes := make(chan time.Time, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = RunTriggered(ctx, clk, time.Minute, trigger, func(context.Context) { passes <- clk.Now() })
	}()
	if at := <-passes; !at.Equal(time.Unix(0, 0)) {
		t.Fatalf("first pass at %v, want at once", at)
	}
	trigger <- struct{}{}
	if at := <-passes; !at.Equal(time.Unix(0, 0)) {
		t.Fatalf("triggered pass at %v, want at once, before the period", at)
	}
	clk.Step(time.Minute)
	if at := <-passes; !at.Equal(time.Unix(60, 0)) {
		t.Fatalf("pass at %v, want one period later", at)
	}
}

func TestUntilPollsEveryPeriodUntilDoneOrTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	var polls atomic.Int32
	result := make(chan bool)
	go func() {
		result <- Until(context.Background(), clk, time.Second, 3*time.Second, func() bool { return polls.Add(1) == 2 })
	}()
	for !clk.HasWaiters() {
		runtime.Gosched()
	}
	if polls.Load() != 0 {
		t.Fatal("polled before the first period")
	}
	clk.Step(time.Second)
	for polls.Load() != 1 {
		runtime.Gosched()
	}
	clk.Step(time.Second)
	if !<-result {
		t.Fatal("Until = false, want true once done")
	}

	start := clk.Now()
	go func() {
		result <- Until(context.Background(), clk, time.Second, 3*time.Second, func() bool { return false })
	}()
	for {
		select {
		case done := <-result:
			if done {
				t.Fatal("Until = true, want false after the timeout")
			}
			if waited := clk.Since(start); waited < 3*time.Second {
				t.Fatalf("Until gave up after %v, want the 3 s timeout", waited)
			}
			return
		default:
			clk.Step(time.Second) // a second at a time until the timeout, whenever Until made its timer
			runtime.Gosched()
		}
	}
}
