package timeline

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Phase is a step of a pod's start.
type Phase string

// The phases of a pod's start, in the order they usually come.
const (
	Admitted         Phase = "Admitted"
	VolumesReady     Phase = "VolumesReady"
	SandboxReady     Phase = "SandboxReady"
	ImageReady       Phase = "ImageReady"
	ContainerCreated Phase = "ContainerCreated"
	ContainerStarted Phase = "ContainerStarted"
	Ready            Phase = "Ready"
)

// Event is one phase reached: by the pod, or by one of its containers (the first attempt's).
type Event struct {
	Phase     Phase       `json:"phase"`
	Container string      `json:"container,omitempty"`
	At        metav1.Time `json:"at"`
	// SinceCreation is the time from the pod's creation to this phase, in seconds.
	SinceCreation float64 `json:"sinceCreationSeconds"`
	// SinceAdmission is the time from the pod's admission on the node to this phase, in seconds.
	SinceAdmission float64 `json:"sinceAdmissionSeconds"`
}

// Timeline is a pod's start on the node.
type Timeline struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	UID       types.UID   `json:"uid"`
	Created   metav1.Time `json:"created"`
	Events    []Event     `json:"events"`
}

// Recorder keeps the timelines of the node's pods. It is safe for concurrent use; the zero value is not.
type Recorder struct {
	// Tracer, when set, gets each pod's start as a span once the pod is Ready ("podStart", from its
	// admission to Ready, the phases its events).
	Tracer trace.Tracer

	clock clock.PassiveClock
	hist  *prometheus.HistogramVec

	mu       sync.Mutex
	pods     map[types.UID]*Timeline
	admitted map[types.UID]time.Time
	seen     map[types.UID]map[string]bool // phase/container already recorded
}

// NewRecorder returns an empty recorder on clk.
func NewRecorder(clk clock.PassiveClock) *Recorder {
	return &Recorder{clock: clk, pods: map[types.UID]*Timeline{}, admitted: map[types.UID]time.Time{},
		seen: map[types.UID]map[string]bool{},
		hist: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "nodelet", Name: "pod_start_phase_seconds",
			Help:    "Time from a pod's admission on the node to each phase of its start (the first attempt of each container).",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}}, []string{"phase"}),
	}
}

// RegisterMetrics registers nodelet_pod_start_phase_seconds.
func (r *Recorder) RegisterMetrics(reg prometheus.Registerer) error { return reg.Register(r.hist) }

// Mark records that the pod (container "": the pod itself) reached phase now, the first time only.
// Marks before the pod's admission are kept, timed from its creation only.
func (r *Recorder) Mark(pod *corev1.Pod, phase Phase, container string) {
	if r == nil || pod == nil {
		return
	}
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	key := string(phase) + "/" + container
	seen := r.seen[pod.UID]
	if seen == nil {
		seen = map[string]bool{}
		r.seen[pod.UID] = seen
	}
	if seen[key] {
		return
	}
	seen[key] = true
	tl := r.pods[pod.UID]
	if tl == nil {
		tl = &Timeline{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Created: pod.CreationTimestamp}
		r.pods[pod.UID] = tl
	}
	if phase == Admitted {
		r.admitted[pod.UID] = now
	}
	ev := Event{Phase: phase, Container: container, At: metav1.NewTime(now)}
	if !pod.CreationTimestamp.IsZero() {
		ev.SinceCreation = now.Sub(pod.CreationTimestamp.Time).Seconds()
	}
	if at, ok := r.admitted[pod.UID]; ok {
		ev.SinceAdmission = now.Sub(at).Seconds()
		r.hist.WithLabelValues(string(phase)).Observe(ev.SinceAdmission)
	}
	tl.Events = append(tl.Events, ev)
	if phase == Ready && r.Tracer != nil {
		r.span(tl)
	}
}

// span records the pod's start as a span with the phases as its events, timed as they were.
func (r *Recorder) span(tl *Timeline) {
	start := tl.Created.Time
	if at, ok := r.admitted[tl.UID]; ok {
		start = at
	}
	_, span := r.Tracer.Start(context.Background(), "podStart", trace.WithTimestamp(start), trace.WithAttributes(
		attribute.String("k8s.pod.uid", string(tl.UID)),
		attribute.String("k8s.pod", tl.Namespace+"/"+tl.Name),
		attribute.String("k8s.pod.name", tl.Name),
		attribute.String("k8s.namespace.name", tl.Namespace),
	))
	for _, e := range tl.Events {
		var attrs []attribute.KeyValue
		if e.Container != "" {
			attrs = append(attrs, attribute.String("k8s.container.name", e.Container))
		}
		span.AddEvent(string(e.Phase), trace.WithTimestamp(e.At.Time), trace.WithAttributes(attrs...))
	}
	span.End(trace.WithTimestamp(tl.Events[len(tl.Events)-1].At.Time))
}

// Get is the timeline of the pod of that namespace and name on the node (the newest, if several UIDs).
func (r *Recorder) Get(namespace, name string) (Timeline, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best *Timeline
	for _, tl := range r.pods {
		if tl.Namespace == namespace && tl.Name == name && (best == nil || tl.Created.After(best.Created.Time)) {
			best = tl
		}
	}
	if best == nil {
		return Timeline{}, false
	}
	out := *best
	out.Events = append([]Event(nil), best.Events...)
	return out, true
}

// Forget drops the timeline of a pod that left the node.
func (r *Recorder) Forget(uid types.UID) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pods, uid)
	delete(r.admitted, uid)
	delete(r.seen, uid)
}
