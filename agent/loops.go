package agent

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// loopCosts count what the agent's periodic loops cost (periodic.Measured): passes, and the CPU and wall
// seconds they took, per loop — an idle node's CPU is theirs (PLEG relists, housekeeping, the eviction
// manager's stats, probes, garbage collection, the static pod files).
type loopCosts struct {
	passes, cpu, wall *prometheus.CounterVec
}

func newLoopCosts(reg prometheus.Registerer) (*loopCosts, error) {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nodelet", Subsystem: "loop", Name: name, Help: help}, []string{"loop"})
	}
	l := &loopCosts{
		passes: vec("passes_total", "Passes made by each of the agent's periodic loops."),
		cpu:    vec("cpu_seconds_total", "CPU seconds the passes of each periodic loop spent on their own thread."),
		wall:   vec("wall_seconds_total", "Wall-clock seconds the passes of each periodic loop took."),
	}
	for _, c := range []prometheus.Collector{l.passes, l.cpu, l.wall} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register the loop cost metrics: %w", err)
		}
	}
	return l, nil
}

// ObservePass counts one pass of loop.
func (l *loopCosts) ObservePass(loop string, cpu, wall time.Duration) {
	l.passes.WithLabelValues(loop).Inc()
	l.cpu.WithLabelValues(loop).Add(cpu.Seconds())
	l.wall.WithLabelValues(loop).Add(wall.Seconds())
}
