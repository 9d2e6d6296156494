package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// metricBuckets are the path labels of the kubelet's HTTP metrics: the root of each path its server
// registers ("metrics/<name>" under /metrics); any other path is "other".
var metricBuckets = map[string]bool{
	"healthz": true, "pods": true, "stats": true, "metrics": true, "metrics/cadvisor": true, "metrics/probes": true,
	"metrics/resource": true, "run": true, "exec": true, "attach": true, "portForward": true, "containerLogs": true,
	"configz": true, "runningpods": true, "pprof": true, "logs": true, "debug": true, "checkpoint": true, "flagz": true,
	"statusz": true,
}

// methodBuckets are the method labels the kubelet keeps; any other method is "other".
var methodBuckets = map[string]bool{
	http.MethodOptions: true, http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodDelete: true, http.MethodTrace: true, http.MethodConnect: true,
}

// longRunningPaths are the kubelet's long-running request paths (its map spells portforward in lower case,
// so /portForward requests are not marked long-running, as with the kubelet).
var longRunningPaths = map[string]bool{"exec": true, "attach": true, "portforward": true, "debug": true}

// httpMetrics are the kubelet's node API request metrics and its WebSocket streaming counter.
type httpMetrics struct {
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	inflight  *prometheus.GaugeVec
	websocket *prometheus.CounterVec
	clock     clock.PassiveClock
}

func newHTTPMetrics(clk clock.PassiveClock) *httpMetrics {
	labels := []string{"method", "path", "server_type", "long_running"}
	return &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "http_requests_total",
			Help: "Number of the http requests received since the server started"}, labels),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "http_requests_duration_seconds",
			Help: "Duration in seconds to serve http requests", Buckets: prometheus.DefBuckets}, labels),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "http_inflight_requests",
			Help: "Number of the inflight http requests"}, labels),
		websocket: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "websocket_streaming_requests_total",
			Help: "Total number of WebSocket streaming requests (exec/attach/portforward) received by the kubelet."}, []string{"subresource"}),
		clock: clk,
	}
}

func (m *httpMetrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.requests, m.durations, m.inflight, m.websocket} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// instrument counts and times the requests next serves, as the kubelet's ServeHTTP: serverType is
// "readwrite" for the authenticated port, "readonly" for the read-only one.
func (m *httpMetrics) instrument(serverType string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method := r.Method
		if !methodBuckets[method] {
			method = "other"
		}
		path := metricBucket(r.URL.Path)
		labels := prometheus.Labels{"method": method, "path": path, "server_type": serverType,
			"long_running": strconv.FormatBool(longRunningPaths[path])}
		m.requests.With(labels).Inc()
		inflight := m.inflight.With(labels)
		inflight.Inc()
		start := m.clock.Now()
		defer func() {
			inflight.Dec()
			m.durations.With(labels).Observe(m.clock.Since(start).Seconds())
		}()
		next.ServeHTTP(w, r)
	})
}

// metricBucket is the kubelet's getMetricBucket: the path's root ("metrics/<name>" under /metrics) when the
// server serves it, else "other".
func metricBucket(path string) string {
	parts := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 3)
	root := parts[0]
	if root == "metrics" && len(parts) > 1 {
		root += "/" + parts[1]
	}
	if metricBuckets[root] {
		return root
	}
	return "other"
}

// websocketRequest counts a WebSocket exec, attach or port-forward (subresource "exec", "attach",
// "portforward").
func (m *httpMetrics) websocketRequest(subresource string) {
	if m != nil {
		m.websocket.WithLabelValues(subresource).Inc()
	}
}

// logSizeDesc is the kubelet's kubelet_container_log_filesystem_used_bytes.
var logSizeDesc = prometheus.NewDesc("kubelet_container_log_filesystem_used_bytes",
	"Bytes used by the container's logs on the filesystem.", []string{"uid", "namespace", "pod", "container"}, nil)

// logMetrics collects the running containers' log usage when scraped, as the kubelet's log metrics
// collector (from the runtime's list of running containers; the CPU rates of the stats summary untouched).
type logMetrics struct{ s *Server }

func (logMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- logSizeDesc }

func (c logMetrics) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	containers, err := c.s.opts.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		return
	}
	for _, ctr := range containers {
		labels := ctr.GetLabels()
		ns, name, uid := labels[runtime.LabelPodNamespace], labels[runtime.LabelPodName], labels[runtime.LabelPodUID]
		cname := ctr.GetMetadata().GetName()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
		dir, err := podconfig.ContainerLogDir(c.s.opts.PodLogsDir, pod, cname)
		if err != nil {
			continue
		}
		if fs := dirUsage(dir); fs != nil && fs.UsedBytes != nil {
			ch <- prometheus.MustNewConstMetric(logSizeDesc, prometheus.GaugeValue, float64(*fs.UsedBytes), uid, ns, name, cname)
		}
	}
}
