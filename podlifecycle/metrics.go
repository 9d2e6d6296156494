package podlifecycle

import (
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/pleg"
)

// podMetrics are the kubelet's pod metrics that nodelet records.
type podMetrics struct {
	workerDuration prometheus.Histogram
	startSLI       prometheus.Histogram
}

func newPodMetrics(reg prometheus.Registerer) *podMetrics {
	m := &podMetrics{
		workerDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "pod_worker_duration_seconds",
			Help: "Duration in seconds to sync a single pod.", Buckets: prometheus.DefBuckets}),
		startSLI: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "pod_start_sli_duration_seconds",
			Help:    "Duration in seconds to start a pod, excluding time to pull images, observed from creation to all containers running.",
			Buckets: []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}}),
	}
	if reg != nil {
		reg.MustRegister(m.workerDuration, m.startSLI)
	}
	return m
}

// RegisterMetrics registers the pod metrics, including running pods and containers, with reg.
func (r *Reconciler) RegisterMetrics(reg prometheus.Registerer) {
	r.metrics = newPodMetrics(reg)
	r.syncer.RegisterMetrics(reg)
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "running_pods",
			Help: "Number of pods that have a running pod sandbox"}, func() float64 { return float64(countRunning(r.pleg.Pods(), false)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "running_containers",
			Help: "Number of containers currently running"}, func() float64 { return float64(countRunning(r.pleg.Pods(), true)) }),
	)
}

// countRunning counts the ready sandboxes or the running containers of the relisted pods.
func countRunning(pods []pleg.RelistedPod, containers bool) int {
	n := 0
	for _, p := range pods {
		if containers {
			for _, c := range p.Containers {
				if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
					n++
				}
			}
			continue
		}
		for _, s := range p.Sandboxes {
			if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				n++
				break
			}
		}
	}
	return n
}

// startedNow reports, once, whether st is the first status of the pod with every container running (the pod
// start SLI's end).
func (w *podWorker) startedNow(st *corev1.PodStatus) bool {
	if w.startObserved || st.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	w.startObserved = true
	return true
}
