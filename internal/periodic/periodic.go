package periodic

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Run waits for ready (nil: no wait), then calls pass at once and every period until ctx ends. It returns
// nil: a pass reports its own failures.
func Run(ctx context.Context, clk clock.WithTicker, ready <-chan struct{}, period time.Duration, pass func(context.Context)) error {
	if !waitReady(ctx, ready) {
		return nil
	}
	ticker := clk.NewTicker(period)
	defer ticker.Stop()
	for {
		pass(ctx)
		if !waitTick(ctx, ticker) {
			return nil
		}
	}
}

// RunTriggered waits for nothing, then calls pass at once and again every period or whenever trigger fires
// (a pass asked for early), until ctx ends. It returns nil: a pass reports its own failures.
func RunTriggered(ctx context.Context, clk clock.WithTicker, period time.Duration, trigger <-chan struct{}, pass func(context.Context)) error {
	ticker := clk.NewTicker(period)
	defer ticker.Stop()
	for {
		pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		case <-trigger:
		}
	}
}

// Until calls done every period, the first time one period after the call, until it returns true; it
// returns false when ctx ended or timeout (on the clock; 0: none) passed first.
func Until(ctx context.Context, clk clock.WithTicker, period, timeout time.Duration, done func() bool) bool {
	ticker := clk.NewTicker(period)
	defer ticker.Stop()
	var expired <-chan time.Time
	if timeout > 0 {
		t := clk.NewTimer(timeout)
		defer t.Stop()
		expired = t.C()
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-expired:
			return false
		case <-ticker.C():
			if done() {
				return true
			}
		}
	}
}

// Every calls pass every period, the first time one period after the call, until ctx ends. It returns nil:
// a pass reports its own failures.
func Every(ctx context.Context, clk clock.WithTicker, period time.Duration, pass func(context.Context)) error {
	ticker := clk.NewTicker(period)
	defer ticker.Stop()
	for waitTick(ctx, ticker) {
		pass(ctx)
	}
	return nil
}

// waitReady waits for ready (nil: no wait); false when ctx ended first.
func waitReady(ctx context.Context, ready <-chan struct{}) bool {
	if ready == nil {
		return true
	}
	select {
	case <-ctx.Done():
		return false
	case <-ready:
		return true
	}
}

// waitTick waits for the ticker's next tick; false when ctx ended first.
func waitTick(ctx context.Context, ticker clock.Ticker) bool {
	select {
	case <-ctx.Done():
		return false
	case <-ticker.C():
		return true
	}
}
