package runtime

import (
	"context"
	"path"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// Metrics records CRI operations under the kubelet's metric names, labelled by operation_type
// (run_podsandbox, create_container, pull_image, ...).
type Metrics struct {
	total    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics creates the runtime operation metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "runtime_operations_total",
			Help: "Cumulative number of runtime operations by operation type.",
		}, []string{"operation_type"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "runtime_operations_errors_total",
			Help: "Cumulative number of runtime operation errors by operation type.",
		}, []string{"operation_type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "runtime_operations_duration_seconds",
			Help:    "Duration in seconds of runtime operations. Broken down by operation type.",
			Buckets: prometheus.ExponentialBuckets(.005, 2.5, 14),
		}, []string{"operation_type"}),
	}
	reg.MustRegister(m.total, m.errors, m.duration)
	return m
}

func (m *Metrics) record(method string, start time.Time, err error) {
	op := operationType(method)
	m.total.WithLabelValues(op).Inc()
	m.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		m.errors.WithLabelValues(op).Inc()
	}
}

func (m *Metrics) unaryInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	m.record(method, start, err)
	return err
}

func (m *Metrics) streamInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	start := time.Now()
	s, err := streamer(ctx, desc, cc, method, opts...)
	m.record(method, start, err)
	return s, err
}

// operationTypes holds the kubelet's names where they differ from the plain snake_case of the RPC.
var operationTypes = map[string]string{
	"UpdateContainerResources": "update_container",
	"ListPodSandbox":           "list_podsandbox",
}

// operationType turns "/runtime.v1.RuntimeService/RunPodSandbox" into "run_podsandbox".
func operationType(fullMethod string) string {
	name := path.Base(fullMethod)
	if op, ok := operationTypes[name]; ok {
		return op
	}
	name = strings.ReplaceAll(name, "PodSandbox", "Podsandbox")
	var b strings.Builder
	for i, r := range name {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
