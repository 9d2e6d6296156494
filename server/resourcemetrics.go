package server

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
)

// The kubelet's /metrics/resource series, which metrics-server reads.
var (
	containerLabels = []string{"container", "pod", "namespace"}
	podLabels       = []string{"pod", "namespace"}

	nodeCPUDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemoryDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"Current working set of the node in bytes", nil, nil)
	containerStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"Start time of the container since unix epoch in seconds", containerLabels, nil)
	containerCPUDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the container in core-seconds", containerLabels, nil)
	containerMemoryDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"Current working set of the container in bytes", containerLabels, nil)
	podCPUDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the pod in core-seconds", podLabels, nil)
	podMemoryDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"Current working set of the pod in bytes", podLabels, nil)
	scrapeErrorDesc = prometheus.NewDesc("scrape_error",
		"1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
	resourceScrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// resourceMetrics serves /metrics/resource: CPU and memory of the node, pods and containers, with the
// time of each reading.
func (s statsHandlers) resourceMetrics(w http.ResponseWriter, r *http.Request) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&resourceCollector{ctx: r.Context(), s: s.Server})
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// resourceCollector collects one scrape; it lives for one request, hence its context.
type resourceCollector struct {
	ctx context.Context //nolint:containedctx // the request's, for the CRI calls of this one collection
	s   *Server
}

// Describe implements prometheus.Collector.
func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemoryDesc, containerStartDesc, containerCPUDesc,
		containerMemoryDesc, podCPUDesc, podMemoryDesc, scrapeErrorDesc, resourceScrapeErrorDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	failed := 0.0
	sum, err := c.s.statsh().summary(c.ctx, true)
	if err != nil {
		ctrl.LoggerFrom(c.ctx).Error(err, "Failed to get stats for /metrics/resource")
		failed = 1
	} else {
		collectNode(ch, sum.Node)
		for _, p := range sum.Pods {
			collectPod(ch, p)
		}
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, failed)
	ch <- prometheus.MustNewConstMetric(resourceScrapeErrorDesc, prometheus.GaugeValue, failed)
}

func collectNode(ch chan<- prometheus.Metric, n statsapi.NodeStats) {
	if n.CPU != nil && n.CPU.UsageCoreNanoSeconds != nil {
		ch <- timed(n.CPU.Time.Time, nodeCPUDesc, prometheus.CounterValue, seconds(*n.CPU.UsageCoreNanoSeconds))
	}
	if n.Memory != nil && n.Memory.WorkingSetBytes != nil {
		ch <- timed(n.Memory.Time.Time, nodeMemoryDesc, prometheus.GaugeValue, float64(*n.Memory.WorkingSetBytes))
	}
}

func collectPod(ch chan<- prometheus.Metric, p statsapi.PodStats) {
	pod, ns := p.PodRef.Name, p.PodRef.Namespace
	for _, c := range p.Containers {
		if !c.StartTime.IsZero() && c.StartTime.Unix() > 0 {
			ch <- prometheus.MustNewConstMetric(containerStartDesc, prometheus.GaugeValue,
				float64(c.StartTime.UnixNano())/float64(time.Second), c.Name, pod, ns)
		}
		if c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
			ch <- timed(c.CPU.Time.Time, containerCPUDesc, prometheus.CounterValue, seconds(*c.CPU.UsageCoreNanoSeconds), c.Name, pod, ns)
		}
		if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
			ch <- timed(c.Memory.Time.Time, containerMemoryDesc, prometheus.GaugeValue, float64(*c.Memory.WorkingSetBytes), c.Name, pod, ns)
		}
	}
	if p.CPU != nil && p.CPU.UsageCoreNanoSeconds != nil {
		ch <- timed(p.CPU.Time.Time, podCPUDesc, prometheus.CounterValue, seconds(*p.CPU.UsageCoreNanoSeconds), pod, ns)
	}
	if p.Memory != nil && p.Memory.WorkingSetBytes != nil {
		ch <- timed(p.Memory.Time.Time, podMemoryDesc, prometheus.GaugeValue, float64(*p.Memory.WorkingSetBytes), pod, ns)
	}
}

func timed(t time.Time, d *prometheus.Desc, vt prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	return prometheus.NewMetricWithTimestamp(t, prometheus.MustNewConstMetric(d, vt, v, labels...))
}

func seconds(nanos uint64) float64 { return float64(nanos) / float64(time.Second) }
