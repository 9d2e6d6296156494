package podsyncer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodelet/nodelet/runtime"
)

// metrics are the syncer's own metrics.
type metrics struct {
	// The kubelet's: RunPodSandbox calls' duration and errors, by RuntimeClass handler.
	sandboxDuration *prometheus.HistogramVec
	sandboxErrors   *prometheus.CounterVec
	containerStarts prometheus.Counter
	podStateReads   *prometheus.CounterVec
	// The kubelet's: sandbox creations tried, of them for user namespaced pods, and the syncs of those that
	// failed.
	startedPods               prometheus.Counter
	startedUserNamespacedPods prometheus.Counter
	userNamespacedPodErrors   prometheus.Counter
	// The kubelet's: sandbox creations that failed, container creations tried and failed (by container type
	// and the error's reason), image pulls by image size.
	startedPodsErrors      prometheus.Counter
	startedContainers      *prometheus.CounterVec
	startedContainerErrors *prometheus.CounterVec
	imagePullDuration      *prometheus.HistogramVec
	resizeDuration         *prometheus.HistogramVec
	// The kubelet's lifecycle hook counters: HTTPS hooks answered over HTTP, sleep hooks cut short.
	httpFallbacks   prometheus.Counter
	sleepTerminated prometheus.Counter
}

// imagePullDurationBuckets are the kubelet's buckets of kubelet_image_pull_duration_seconds.
var imagePullDurationBuckets = []float64{1, 5, 10, 20, 30, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// imageSizeBuckets are the kubelet's image_size_in_bytes labels by lower bound.
var imageSizeBuckets = []struct {
	lowerBound uint64
	label      string
}{
	{0, "0-10MB"}, {10 << 20, "10MB-100MB"}, {100 << 20, "100MB-500MB"}, {500 << 20, "500MB-1GB"}, {1 << 30, "1GB-5GB"},
	{5 << 30, "5GB-10GB"}, {10 << 30, "10GB-20GB"}, {20 << 30, "20GB-30GB"}, {30 << 30, "30GB-40GB"}, {40 << 30, "40GB-60GB"},
	{60 << 30, "60GB-100GB"}, {100 << 30, "GT100GB"},
}

// imageSizeBucket is the kubelet's GetImageSizeBucket: the label of the bucket size falls in ("N/A" when the
// size is not known).
func imageSizeBucket(size uint64) string {
	if size == 0 {
		return "N/A"
	}
	for i := len(imageSizeBuckets) - 1; i >= 0; i-- {
		if size > imageSizeBuckets[i].lowerBound {
			return imageSizeBuckets[i].label
		}
	}
	return ""
}

// containerTypeLabel is the container_type of the started-containers metrics, as the kubelet's.
func containerTypeLabel(kind runtime.ContainerKind) string {
	switch kind {
	case runtime.KindInit, runtime.KindSidecar:
		return "init_container"
	case runtime.KindEphemeral:
		return "ephemeral_container"
	}
	return "container"
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sandboxDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "run_podsandbox_duration_seconds",
			Help:    "Duration in seconds of the run_podsandbox operations. Broken down by RuntimeClass.Handler.",
			Buckets: prometheus.DefBuckets}, []string{"runtime_handler"}),
		sandboxErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "run_podsandbox_errors_total",
			Help: "Cumulative number of the run_podsandbox operation errors by RuntimeClass.Handler."}, []string{"runtime_handler"}),
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
		startedPodsErrors: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "started_pods_errors_total",
			Help: "Cumulative number of errors when starting pods"}),
		startedContainers: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "started_containers_total",
			Help: "Cumulative number of containers started"}, []string{"container_type"}),
		startedContainerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "started_containers_errors_total",
			Help: "Cumulative number of errors when starting containers"}, []string{"container_type", "code"}),
		imagePullDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "image_pull_duration_seconds",
			Help: "Duration in seconds to pull an image.", Buckets: imagePullDurationBuckets}, []string{"image_size_in_bytes"}),
		resizeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "pod_resize_duration_milliseconds",
			Help:    "Duration in milliseconds to actuate a pod resize",
			Buckets: []float64{10, 50, 100, 500, 1000, 2000, 5000, 10000, 20000, 30000, 60000, 120000, 300000, 600000}}, []string{"success"}),
		httpFallbacks: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "lifecycle_handler_http_fallbacks_total",
			Help: "The number of times lifecycle handlers successfully fell back to http from https."}),
		sleepTerminated: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "sleep_action_terminated_early_total",
			Help: "The number of times lifecycle sleep handler got terminated before it finishes"}),
	}
	if reg != nil {
		reg.MustRegister(m.sandboxDuration, m.sandboxErrors, m.containerStarts, m.podStateReads, m.startedPods, m.startedUserNamespacedPods,
			m.userNamespacedPodErrors, m.startedPodsErrors, m.startedContainers, m.startedContainerErrors, m.imagePullDuration,
			m.resizeDuration, m.httpFallbacks, m.sleepTerminated)
	}
	return m
}

// RegisterMetrics registers the syncer's metrics with reg.
func (s *Syncer) RegisterMetrics(reg prometheus.Registerer) {
	s.metrics = newMetrics(reg)
	s.puller.pullDuration.Store(s.metrics.imagePullDuration)
	s.resize.duration.Store(s.metrics.resizeDuration)
}
