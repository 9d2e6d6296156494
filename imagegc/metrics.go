package imagegc

import "github.com/prometheus/client_golang/prometheus"

// metrics are the kubelet's image garbage collection metrics.
type metrics struct {
	collected *prometheus.CounterVec
}

// newMetrics creates the metrics and registers them with reg; a nil reg registers nothing (the metrics
// are still recorded, unseen).
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		collected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "image_garbage_collected_total",
			Help: "Total number of images garbage collected by the kubelet, whether through disk usage or image age.",
		}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.collected)
	}
	return m
}
