package podcgroups

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Operation types of kubelet_cgroup_manager_duration_seconds, the kubelet's.
const (
	opCreate  = "create"
	opUpdate  = "update"
	opDestroy = "destroy"
)

// RegisterMetrics registers kubelet_cgroup_manager_duration_seconds{operation_type} on reg and observes
// each operation from then on: a pod cgroup made (create), the QoS or kubepods values written (update),
// a pod cgroup removed (destroy).
func (m *Manager) RegisterMetrics(reg prometheus.Registerer) error {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "cgroup_manager_duration_seconds",
		Help: "Duration in seconds for cgroup manager operations. Broken down by method.", Buckets: prometheus.DefBuckets},
		[]string{"operation_type"})
	if err := reg.Register(h); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return err
		}
		h = are.ExistingCollector.(*prometheus.HistogramVec)
	}
	m.duration = h
	return nil
}

// observe records an operation that began at start.
func (m *Manager) observe(op string, start time.Time) {
	if m.duration != nil {
		m.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	}
}
