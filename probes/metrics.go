package probes

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// The result label values of prober_probe_total, the kubelet's. The kubelet's prober turns every probe it
// records into a success or a failure (a probe that errored is thrown away unrecorded), so it never records
// ResultUnknown in practice; nodelet does the same.
const (
	ResultSuccessful = "successful"
	ResultFailed     = "failed"
	ResultUnknown    = "unknown"
)

// ProbeLabels name one probe of one container in the prober metrics.
type ProbeLabels struct {
	Type      string // "Liveness", "Readiness" or "Startup"
	Container string
	Pod       string
	Namespace string
	PodUID    types.UID
}

// MetricsRecorder receives the probe runs that produced a result, and the end of a probe's series.
// *Metrics is the kubelet's.
type MetricsRecorder interface {
	// Observe records one run of the probe: its result (ResultSuccessful, ResultFailed) and how long it took.
	Observe(p ProbeLabels, result string, took time.Duration)
	// Forget drops the probe's series: its pod is gone, or the probe stopped for good.
	Forget(p ProbeLabels)
}

// Metrics are the kubelet's prober metrics, which it serves at /metrics/probes: prober_probe_total, a
// counter by probe type, result, container, pod, namespace and pod UID, and prober_probe_duration_seconds,
// a histogram (Prometheus' default buckets) by probe type, container, pod and namespace. As the kubelet, a
// failed probe is counted but its duration is not observed. Help texts carry the kubelet's stability level
// as its registry prints them. Metrics is a prometheus.Collector: register it where it is served.
type Metrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics returns the prober metrics, with no series yet.
func NewMetrics() *Metrics {
	return &Metrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "prober", Name: "probe_total",
			Help: "[BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.",
		}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "prober", Name: "probe_duration_seconds",
			Help:    "[ALPHA] Duration in seconds for a probe response.",
			Buckets: prometheus.DefBuckets,
		}, []string{"probe_type", "container", "pod", "namespace"}),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.total.Describe(ch)
	m.duration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.total.Collect(ch)
	m.duration.Collect(ch)
}

// Observe implements MetricsRecorder.
func (m *Metrics) Observe(p ProbeLabels, result string, took time.Duration) {
	m.total.WithLabelValues(p.Type, result, p.Container, p.Pod, p.Namespace, string(p.PodUID)).Inc()
	if result != ResultFailed {
		m.duration.WithLabelValues(p.Type, p.Container, p.Pod, p.Namespace).Observe(took.Seconds())
	}
}

// Forget implements MetricsRecorder.
func (m *Metrics) Forget(p ProbeLabels) {
	for _, result := range []string{ResultSuccessful, ResultFailed, ResultUnknown} {
		m.total.DeleteLabelValues(p.Type, result, p.Container, p.Pod, p.Namespace, string(p.PodUID))
	}
	m.duration.DeleteLabelValues(p.Type, p.Container, p.Pod, p.Namespace)
}

// metricResult is the prober_probe_total result of an outcome that is not unknown.
func metricResult(o outcome) string {
	if o.verdict == verdictFailure {
		return ResultFailed
	}
	return ResultSuccessful
}
