package runtime

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Backoff bounds the retries of WaitForRuntime.
type Backoff struct {
	Initial time.Duration // first wait
	Max     time.Duration // cap of the doubling wait
}

// DefaultBackoff retries after 100 ms, doubling up to 5 s.
var DefaultBackoff = Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}

// versioner is the part of Client that WaitForRuntime needs.
type versioner interface {
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
}

// WaitForRuntime validates the connection with Version, retrying with back-off (on clk) until the runtime
// answers or ctx ends. A runtime that is not up yet is not fatal: the agent waits for it.
func WaitForRuntime(ctx context.Context, v versioner, clk clock.Clock, b Backoff) (*runtimeapi.VersionResponse, error) {
	log := logr.FromContextOrDiscard(ctx)
	wait := b.Initial
	for attempt := 1; ; attempt++ {
		resp, err := v.Version(ctx)
		if err == nil {
			log.Info("Container runtime answered", "runtimeName", resp.RuntimeName,
				"runtimeVersion", resp.RuntimeVersion, "runtimeAPIVersion", resp.RuntimeApiVersion)
			return resp, nil
		}
		log.Info("Container runtime not ready, retrying", "attempt", attempt, "retryIn", wait, "err", err.Error())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-clk.After(wait):
		}
		wait = min(2*wait, b.Max)
	}
}
