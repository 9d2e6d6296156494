package podlifecycle

import (
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime/pleg"
)

// podMetrics are the kubelet's pod metrics that nodelet records.
type podMetrics struct {
	workerDuration   *prometheus.HistogramVec
	workerStart      prometheus.Histogram
	startSLI         prometheus.Histogram
	startDuration    prometheus.Histogram
	startTotal       prometheus.Histogram
	containersPerPod prometheus.Histogram
	// The kubelet's resize counters: resizes asked for, by container resource, requirement and operation;
	// resizes found infeasible, by why.
	requestedResizes  *prometheus.CounterVec
	infeasibleResizes *prometheus.CounterVec
	// orphanedRuntimePods counts the pods found in the runtime that no worker knew.
	orphanedRuntimePods prometheus.Counter
	// restartedPods counts the pods run again under a UID whose stop had begun (by static).
	restartedPods *prometheus.CounterVec
}

// podStartupDurationBuckets are the kubelet's buckets of the pod start histograms.
var podStartupDurationBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

func newPodMetrics(reg prometheus.Registerer) *podMetrics {
	m := &podMetrics{
		workerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "pod_worker_duration_seconds",
			Help: "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync", Buckets: prometheus.DefBuckets},
			[]string{"operation_type"}),
		workerStart: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "pod_worker_start_duration_seconds",
			Help: "Duration in seconds from kubelet seeing a pod to starting a worker.", Buckets: prometheus.DefBuckets}),
		startSLI: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "pod_start_sli_duration_seconds",
			Help:    "Duration in seconds to start a pod, excluding time to pull images, observed from creation to all containers running.",
			Buckets: podStartupDurationBuckets}),
		startDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "pod_start_duration_seconds",
			Help:    "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
			Buckets: podStartupDurationBuckets}),
		startTotal: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "pod_start_total_duration_seconds",
			Help: "Duration in seconds to start a pod since creation, including time to pull images and run init containers, " +
				"measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
			Buckets: podStartupDurationBuckets}),
		containersPerPod: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "containers_per_pod_count",
			Help: "The number of containers per pod.", Buckets: prometheus.ExponentialBuckets(1, 2, 5)}),
		requestedResizes: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "container_requested_resizes_total",
			Help: "Number of requested resizes, counted at the container level. Different resources on the same container are counted separately. " +
				"The 'requirement' label refers to 'memory' or 'limits'; the 'operation' label can be one of 'add', 'remove', 'increase' or 'decrease'."},
			[]string{"resource", "requirement", "operation"}),
		infeasibleResizes: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "pod_infeasible_resizes_total",
			Help: "Number of infeasible resizes for pods."}, []string{"reason_detail"}),
		orphanedRuntimePods: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "orphaned_runtime_pods_total",
			Help: "Number of pods that have been detected in the container runtime without being already known to the pod worker. " +
				"This typically indicates the kubelet was restarted while a pod was force deleted in the API or in the local configuration, which is unusual."}),
		restartedPods: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "restarted_pods_total",
			Help: "Number of pods that have been restarted because they were deleted and recreated with the same UID while the kubelet was watching them " +
				"(common for static pods, extremely uncommon for API pods)"}, []string{"static"}),
	}
	// The kubelet adds its housekeeping pass's count to both series each pass: they exist from the start.
	m.restartedPods.WithLabelValues("true")
	m.restartedPods.WithLabelValues("")
	if reg != nil {
		reg.MustRegister(m.workerDuration, m.workerStart, m.startSLI, m.startDuration, m.startTotal, m.containersPerPod, m.requestedResizes, m.infeasibleResizes,
			m.orphanedRuntimePods, m.restartedPods)
	}
	return m
}

// RegisterMetrics registers the pod metrics, including running pods and containers, with reg.
func (r *Reconciler) RegisterMetrics(reg prometheus.Registerer) {
	r.metrics = newPodMetrics(reg)
	r.resizes.metrics = r.metrics
	r.syncer.RegisterMetrics(reg)
	if err := r.alloc.RegisterMetrics(reg, r.desiredPodByUID); err != nil {
		panic(err)
	}
	if err := r.timeline.RegisterMetrics(reg); err != nil {
		panic(err)
	}
	if err := r.statuses.RegisterMetrics(reg); err != nil {
		panic(err) // as MustRegister: a name registered twice is a programming error
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "running_pods",
			Help: "Number of pods that have a running pod sandbox"}, func() float64 { return float64(countRunning(r.pleg.Pods(), false)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "running_containers",
			Help: "Number of containers currently running"}, func() float64 { return float64(countRunning(r.pleg.Pods(), true)) }),
		podCounts{r},
	)
}

// The kubelet's gauges of the pods it works with, computed when scraped from the pod workers.
var (
	activePodsDesc = prometheus.NewDesc("kubelet_active_pods",
		"The number of pods the kubelet considers active and which are being considered when admitting new pods. static is true if the pod is not from the apiserver.",
		[]string{"static"}, nil)
	desiredPodsDesc = prometheus.NewDesc("kubelet_desired_pods",
		"The number of pods the kubelet is being instructed to run. static is true if the pod is not from the apiserver.", []string{"static"}, nil)
	mirrorPodsDesc = prometheus.NewDesc("kubelet_mirror_pods",
		"The number of mirror pods the kubelet will try to create (one per admitted static pod)", nil, nil)
	workingPodsDesc = prometheus.NewDesc("kubelet_working_pods",
		"Number of pods the kubelet is actually running, broken down by lifecycle phase, whether the pod is desired, orphaned, or runtime only "+
			"(also orphaned), and whether the pod is static. An orphaned pod has been removed from local configuration or force deleted in the API "+
			"and consumes resources that are not otherwise visible.", []string{"lifecycle", "config", "static"}, nil)
	ephemeralContainersDesc = prometheus.NewDesc("kubelet_managed_ephemeral_containers",
		"Current number of ephemeral containers in pods managed by this kubelet.", nil, nil)
)

// podCounts collects the pod gauges.
type podCounts struct{ r *Reconciler }

func (podCounts) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{activePodsDesc, desiredPodsDesc, mirrorPodsDesc, workingPodsDesc, ephemeralContainersDesc} {
		ch <- d
	}
}

// workingKey is one series of kubelet_working_pods.
type workingKey struct{ lifecycle, config, static string }

func (c podCounts) Collect(ch chan<- prometheus.Metric) {
	n := c.count()
	for static, v := range n.active {
		ch <- prometheus.MustNewConstMetric(activePodsDesc, prometheus.GaugeValue, float64(v), static)
	}
	for static, v := range n.desired {
		ch <- prometheus.MustNewConstMetric(desiredPodsDesc, prometheus.GaugeValue, float64(v), static)
	}
	for k, v := range n.working {
		ch <- prometheus.MustNewConstMetric(workingPodsDesc, prometheus.GaugeValue, float64(v), k.lifecycle, k.config, k.static)
	}
	ch <- prometheus.MustNewConstMetric(mirrorPodsDesc, prometheus.GaugeValue, float64(n.mirrors))
	ch <- prometheus.MustNewConstMetric(ephemeralContainersDesc, prometheus.GaugeValue, float64(n.ephemeral))
}

// podTally is what the pod gauges say.
type podTally struct {
	active, desired    map[string]int
	working            map[workingKey]int
	mirrors, ephemeral int
}

// count tallies the pod workers: every series of kubelet_working_pods is present, zero or not.
func (c podCounts) count() podTally {
	n := podTally{active: map[string]int{"": 0, "true": 0}, desired: map[string]int{"": 0, "true": 0}, working: map[workingKey]int{}}
	for _, lc := range []string{"sync", "terminating", "terminated"} {
		for _, cfg := range []string{"desired", "orphan", "runtime_only"} {
			for _, st := range []string{"", "true"} {
				n.working[workingKey{lc, cfg, st}] = 0
			}
		}
	}
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	for _, w := range c.r.workers {
		static := staticLabel(w.pod)
		config := workerConfig(w)
		if config == "desired" {
			n.desired[static]++
			if w.pod != nil {
				n.ephemeral += len(w.pod.Spec.EphemeralContainers)
			}
		}
		stage := w.stage()
		n.working[workingKey{[]string{"sync", "terminating", "terminated"}[stage], config, static}]++
		if config == "desired" && w.isAdmitted() && stage != terminated {
			n.active[static]++
			if static == "true" {
				n.mirrors++
			}
		}
	}
	return n
}

// staticLabel is the static label of the kubelet's pod metrics: "true" for a static pod, else "".
func staticLabel(pod *corev1.Pod) string {
	if pod != nil && podrules.IsStaticPod(pod) {
		return "true"
	}
	return ""
}

// workerConfig is the config label of a worker's pod: desired, orphan (no longer desired), or runtime_only
// (found in the runtime only).
func workerConfig(w *podWorker) string {
	switch {
	case w.orphaned.Load() && w.pod == nil:
		return "runtime_only"
	case w.orphaned.Load():
		return "orphan"
	}
	return "desired"
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
