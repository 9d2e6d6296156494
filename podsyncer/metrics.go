package podsyncer

import "github.com/prometheus/client_golang/prometheus"

// metrics are the syncer's own metrics.
type metrics struct {
	sandboxDuration prometheus.Histogram
	containerStarts prometheus.Counter
	podStateReads   *prometheus.CounterVec
	// The kubelet's: sandbox creations tried, of them for user namespaced pods, and the syncs of those that
	// failed.
	startedPods               prometheus.Counter
	startedUserNamespacedPods prometheus.Counter
	userNamespacedPodErrors   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sandboxDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "nodelet", Name: "run_podsandbox_duration_seconds",
			Help: "Duration of RunPodSandbox as seen by the pod worker.", Buckets: prometheus.DefBuckets}),
		containerStarts: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "nodelet", Name: "container_starts_total",
			Help: "Containers started by the agent."}),
		podStateReads: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "nodelet", Name: "pod_state_reads_total",
			Help: "Pod runtime states a sync started from, by source: the PLEG cache or a runtime read."}, []string{"source"}),
		startedPods: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "started_pods_total",
			Help: "Cumulative number of pods started"}),
		startedUserNamespacedPods: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "started_user_namespaced_pods_total",
			Help: "Cumulative number of pods with user namespaces started. This metric will only be collected on Linux."}),
		userNamespacedPodErrors: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "started_user_namespaced_pods_errors_total",
			Help: "Cumulative number of errors when starting pods with user namespaces. This metric will only be collected on Linux."}),
	}
	if reg != nil {
		reg.MustRegister(m.sandboxDuration, m.containerStarts, m.podStateReads, m.startedPods, m.startedUserNamespacedPods,
			m.userNamespacedPodErrors)
	}
	return m
}

// RegisterMetrics registers the syncer's metrics with reg.
func (s *Syncer) RegisterMetrics(reg prometheus.Registerer) { s.metrics = newMetrics(reg) }
