package allocation

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
)

// The kubelet's resize gauges, computed when scraped from the resize conditions.
var (
	inProgressResizesDesc = prometheus.NewDesc("kubelet_pod_in_progress_resizes", "Number of in-progress resizes for pods.", nil, nil)
	pendingResizesDesc    = prometheus.NewDesc("kubelet_pod_pending_resizes",
		"Number of pending resizes for pods. Label 'priority_bucket' classifies the pod priority (system-critical: >=2000000000, "+
			"high: 100000..1999999999, medium: 1..99999, normal: 0/default, low: -999..-1, very-low: <=-1000, unknown: nil pod). "+
			"Label 'reason' describes the state (deferred, infeasible).", []string{"reason", "priority_bucket"}, nil)
)

// PriorityBucket is the kubelet's priority_bucket label of a pod's resize metrics.
func PriorityBucket(pod *corev1.Pod) string {
	if pod == nil {
		return "unknown"
	}
	if pod.Spec.Priority == nil || *pod.Spec.Priority == 0 {
		return "normal"
	}
	switch p := *pod.Spec.Priority; {
	case p >= podrules.SystemCriticalPriority:
		return "system-critical"
	case p >= 100000:
		return "high"
	case p > 0:
		return "medium"
	case p > -1000:
		return "low"
	}
	return "very-low"
}

// RegisterMetrics registers kubelet_pod_in_progress_resizes and kubelet_pod_pending_resizes (by reason and
// the priority bucket of the pod podOf finds; a pod it does not find is left out, as by the kubelet).
func (m *Manager) RegisterMetrics(reg prometheus.Registerer, podOf func(types.UID) *corev1.Pod) error {
	return reg.Register(resizeGauges{m: m, podOf: podOf})
}

type resizeGauges struct {
	m     *Manager
	podOf func(types.UID) *corev1.Pod
}

func (resizeGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- inProgressResizesDesc
	ch <- pendingResizesDesc
}

func (g resizeGauges) Collect(ch chan<- prometheus.Metric) {
	type key struct{ reason, bucket string }
	inProgress := 0
	pending := map[types.UID]string{}
	g.m.mu.Lock()
	for uid, rc := range g.m.resizes {
		if rc.inProgress != nil {
			inProgress++
		}
		if rc.pending != nil {
			pending[uid] = strings.ToLower(rc.pending.Reason)
		}
	}
	g.m.mu.Unlock()
	counts := map[key]int{}
	for uid, reason := range pending {
		if pod := g.podOf(uid); pod != nil {
			counts[key{reason, PriorityBucket(pod)}]++
		}
	}
	ch <- prometheus.MustNewConstMetric(inProgressResizesDesc, prometheus.GaugeValue, float64(inProgress))
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(pendingResizesDesc, prometheus.GaugeValue, float64(n), k.reason, k.bucket)
	}
}
