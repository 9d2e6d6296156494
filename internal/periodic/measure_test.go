package periodic

import (
	"context"
	"sync"
	"testing"
	"time"
)

type passes struct {
	mu   sync.Mutex
	n    map[string]int
	cpu  map[string]time.Duration
	wall map[string]time.Duration
}

func (p *passes) ObservePass(loop string, cpu, wall time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n[loop]++
	p.cpu[loop] += cpu
	p.wall[loop] += wall
}

// A measured pass reports its loop, its thread's CPU time and its wall time to the context's observer; without
// one, the pass is called as is.
func TestMeasuredReportsEachPassCost(t *testing.T) {
	calls := 0
	pass := func(context.Context) {
		calls++
		x := 0
		for deadline := time.Now().Add(20 * time.Millisecond); time.Now().Before(deadline); {
			x++ // busy: the thread's CPU time grows
		}
		_ = x
	}
	Measured(t.Context(), "plain", pass)(t.Context())
	o := &passes{n: map[string]int{}, cpu: map[string]time.Duration{}, wall: map[string]time.Duration{}}
	ctx := WithObserver(t.Context(), o)
	f := Measured(ctx, "busy", pass)
	f(ctx)
	f(ctx)
	if calls != 3 || o.n["busy"] != 2 || o.n["plain"] != 0 {
		t.Fatalf("calls %d, observed %v; want 3 calls, 2 observed passes of busy", calls, o.n)
	}
	if o.cpu["busy"] <= 0 || o.wall["busy"] < 40*time.Millisecond {
		t.Errorf("busy passes cost %v CPU, %v wall; want some CPU and at least their 40 ms", o.cpu["busy"], o.wall["busy"])
	}
}
