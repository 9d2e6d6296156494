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
	for !clk.HasWaiters() { // the ticker is made right after the first pass
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
