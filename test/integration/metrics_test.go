package integration_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
)

var _ = Describe("The kubelet's metrics", func() {
	ctx := context.Background()

	It("count and time a pod's start, its containers and the node's pods", func() {
		nodeName, ns := "metrics-"+utilrand.String(6), "ns-"+utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		rt, cri := startFakeRuntime()
		rt.SetPullable("docker.io/library/busybox:latest", 20<<20)
		b := newPodBed(nodeName, rt, cri)
		Expect(admin.Create(ctx, busyboxPod(ns, "web", nodeName))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(apiPod(ctx, g, ns, "web").Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(metricSeries(b, "kubelet_pod_start_duration_seconds")).To(Equal(map[string]float64{"": 1}))
		}).Should(Succeed())

		Expect(metricSeries(b, "kubelet_node_name")).To(Equal(map[string]float64{"node=" + nodeName: 1}))
		Expect(metricSeries(b, "kubelet_started_pods_total")).To(Equal(map[string]float64{"": 1}))
		Expect(metricSeries(b, "kubelet_started_containers_total")).To(Equal(map[string]float64{"container_type=container": 1}))
		Expect(metricSeries(b, "kubelet_pod_start_total_duration_seconds")).To(Equal(map[string]float64{"": 1}))
		Expect(metricSeries(b, "kubelet_image_pull_duration_seconds")).To(Equal(map[string]float64{"image_size_in_bytes=10MB-100MB": 1}))
		Expect(metricSeries(b, "kubelet_containers_per_pod_count")).To(Equal(map[string]float64{"": 1}))
		Expect(metricSeries(b, "kubelet_pod_worker_start_duration_seconds")).To(Equal(map[string]float64{"": 1}))
		Expect(metricSeries(b, "kubelet_pod_worker_duration_seconds")).To(HaveKeyWithValue("operation_type=create", 1.0))
		Expect(metricSeries(b, "kubelet_pod_worker_duration_seconds")).To(HaveKey("operation_type=sync"))
		Expect(metricSeries(b, "kubelet_run_podsandbox_duration_seconds")).To(Equal(map[string]float64{"runtime_handler=": 1}))
		Expect(metricSeries(b, "kubelet_run_podsandbox_errors_total")).To(BeEmpty())
		Expect(metricSeries(b, "kubelet_pod_status_sync_duration_seconds")[""]).To(BeNumerically(">=", 1))
		Expect(metricSeries(b, "kubelet_active_pods")).To(Equal(map[string]float64{"static=": 1, "static=true": 0}))
		Expect(metricSeries(b, "kubelet_desired_pods")).To(Equal(map[string]float64{"static=": 1, "static=true": 0}))
		Expect(metricSeries(b, "kubelet_working_pods")).To(HaveKeyWithValue("config=desired,lifecycle=sync,static=", 1.0))
		Expect(metricSeries(b, "kubelet_mirror_pods")).To(Equal(map[string]float64{"": 0}))
		Expect(metricSeries(b, "kubelet_managed_ephemeral_containers")).To(Equal(map[string]float64{"": 0}))
		Expect(metricSeries(b, "kubelet_restarted_pods_total")).To(Equal(map[string]float64{"static=": 0, "static=true": 0}))
		Eventually(func() map[string]float64 { return metricSeries(b, "nodelet_pod_start_phase_seconds") }).Should(Equal(map[string]float64{
			"phase=Admitted": 1, "phase=VolumesReady": 1, "phase=SandboxReady": 1, "phase=ImageReady": 1,
			"phase=ContainerCreated": 1, "phase=ContainerStarted": 1, "phase=Ready": 1,
		}))
	})

	It("count the runtime's failures to run a sandbox, by handler", func() {
		nodeName, ns := "metrics-"+utilrand.String(6), "ns-"+utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		rt, cri := startFakeRuntime()
		rt.AddImage("docker.io/library/busybox:latest", 1<<20)
		rt.InjectError("RunPodSandbox", status.Error(codes.Internal, "failed to setup network for sandbox"))
		b := newPodBed(nodeName, rt, cri)
		Expect(admin.Create(ctx, busyboxPod(ns, "web", nodeName))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(metricSeries(b, "kubelet_run_podsandbox_errors_total")).To(HaveKeyWithValue("runtime_handler=", BeNumerically(">=", 1)))
			g.Expect(metricSeries(b, "kubelet_started_pods_errors_total")).To(HaveKeyWithValue("", BeNumerically(">=", 1)))
		}).Should(Succeed())
		Expect(metricSeries(b, "kubelet_run_podsandbox_duration_seconds")).To(HaveKeyWithValue("runtime_handler=", BeNumerically(">=", 1)))
	})
})

var _ = Describe("Tracing", func() {
	ctx := context.Background()

	It("traces each pod sync with the CRI calls it makes as children, and each pod's start with its phases", func() {
		nodeName, ns := "traced-"+utilrand.String(6), "ns-"+utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		rt, cri := startFakeRuntime()
		rt.AddImage("docker.io/library/busybox:latest", 1<<20)
		newTracedPodBed(nodeName, rt, cri, tp)
		Expect(admin.Create(ctx, busyboxPod(ns, "web", nodeName))).To(Succeed())
		var podStart sdktrace.ReadOnlySpan
		Eventually(func(g Gomega) {
			for _, s := range spans.Ended() {
				if s.Name() == "podStart" {
					podStart = s
				}
			}
			g.Expect(podStart).NotTo(BeNil())
		}).Should(Succeed())
		var phases []string
		for _, e := range podStart.Events() {
			phases = append(phases, e.Name)
		}
		Expect(phases).To(Equal([]string{"Admitted", "VolumesReady", "SandboxReady", "ImageReady", "ContainerCreated", "ContainerStarted", "Ready"}))

		// The sync that ran the sandbox is the parent of the RunPodSandbox call.
		byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
		for _, s := range spans.Ended() {
			byID[s.SpanContext().SpanID()] = s
		}
		var runSandbox sdktrace.ReadOnlySpan
		for _, s := range spans.Ended() {
			if s.Name() == "runtime.v1.RuntimeService/RunPodSandbox" {
				runSandbox = s
			}
		}
		Expect(runSandbox).NotTo(BeNil())
		parent, ok := byID[runSandbox.Parent().SpanID()]
		Expect(ok).To(BeTrue(), "RunPodSandbox's parent span was recorded")
		Expect(parent.Name()).To(Equal("syncPod"))
		Expect(parent.Attributes()).To(ContainElement(attribute.String("k8s.pod", ns+"/web")))
	})
})

// value is a sample's value: a counter's or gauge's, a histogram's count.
func value(t dto.MetricType, m *dto.Metric) float64 {
	switch t {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// metricSeries are the samples of the agent's family name, by their labels ("k=v,..." in label order): a
// counter's or gauge's value, a histogram's count.
func metricSeries(b *podBed, name string) map[string]float64 {
	families, err := b.metrics.Gather()
	Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			key := ""
			for i, l := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += l.GetName() + "=" + l.GetValue()
			}
			out[key] = value(f.GetType(), m)
		}
	}
	return out
}
