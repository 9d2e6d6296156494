package periodic

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Run waits for ready (nil: no wait), then calls pass at once and every period until ctx ends. It returns
// nil: a pass reports its own failures.
func Run(ctx context.Context, clk clock.WithTicker, ready <-chan struct{}, period time.Duration, pass func(context.Context)) error {
	if ready != nil {
		select {
		case <-ctx.Done():
			return nil
		case <-ready:
		}
	}
	ticker := clk.NewTicker(period)
	defer ticker.Stop()
	for {
		pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}
