package server

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	compbasemetrics "k8s.io/component-base/metrics"
	"k8s.io/utils/clock"
)

// probeMetricsRegistry is what the kubelet serves at /metrics/probes: the prober's metrics in a registry of
// their own, with the process's start time (process_start_time_seconds, as its registry prints it).
func probeMetricsRegistry(probes prometheus.Collector, clk clock.PassiveClock) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	start := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "process_start_time_seconds",
		Help: "[ALPHA] Start time of the process since unix epoch in seconds.",
	})
	seconds, err := compbasemetrics.GetProcessStart()
	if err != nil {
		seconds = float64(clk.Now().Unix()) // the kubelet's fallback
	}
	start.Set(seconds)
	reg.MustRegister(start)
	if probes != nil {
		if err := reg.Register(probes); err != nil {
			return nil, fmt.Errorf("node server: probe metrics: %w", err)
		}
	}
	return reg, nil
}
