package runtime

import "github.com/prometheus/client_golang/prometheus"

// plegMetrics are the kubelet's PLEG metrics.
type plegMetrics struct {
	duration prometheus.Histogram
	interval prometheus.Histogram
	lastSeen prometheus.Gauge
	discard  prometheus.Counter
}

// newPLEGMetrics creates the PLEG metrics and registers them with reg; a nil reg registers nothing (the
// metrics are still recorded, unseen).
func newPLEGMetrics(reg prometheus.Registerer) *plegMetrics {
	m := &plegMetrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pleg_relist_duration_seconds",
			Help: "Duration in seconds for relisting pods in PLEG.", Buckets: prometheus.DefBuckets,
		}),
		interval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pleg_relist_interval_seconds",
			Help: "Interval in seconds between relisting in PLEG.", Buckets: prometheus.DefBuckets,
		}),
		lastSeen: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "pleg_last_seen_seconds",
			Help: "Timestamp in seconds when PLEG was last seen active.",
		}),
		discard: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "pleg_discard_events",
			Help: "The number of discard events in PLEG.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.duration, m.interval, m.lastSeen, m.discard)
	}
	return m
}
