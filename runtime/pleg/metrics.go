package pleg

import "github.com/prometheus/client_golang/prometheus"

// plegMetrics are the kubelet's PLEG metrics.
type plegMetrics struct {
	duration prometheus.Histogram
	interval prometheus.Histogram
	lastSeen prometheus.Gauge
	discard  prometheus.Counter
	// connSuccess and connError are the kubelet's evented PLEG connection counters: subscriptions to the
	// runtime's container events that delivered events, and those that failed.
	connSuccess prometheus.Counter
	connError   prometheus.Counter
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
		connSuccess: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "evented_pleg_connection_success_count",
			Help: "The number of times a streaming client was obtained to receive CRI Events.",
		}),
		connError: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "evented_pleg_connection_error_count",
			Help: "The number of errors encountered during the establishment of streaming connection with the CRI runtime.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.duration, m.interval, m.lastSeen, m.discard, m.connSuccess, m.connError)
	}
	return m
}
