package podlifecycle

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/podrules"
)

// An API pod's first-seen time is what its arrival noted, kept until its first sync or deletion; a mirror pod
// is never noted (it never syncs); a static pod's is its source's config.seen.
func TestFirstSeen(t *testing.T) {
	var s firstSeen
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	api := &corev1.Pod{}
	api.UID = "api"
	s.note(api, t0)
	s.note(api, t0.Add(time.Minute)) // an update is not an arrival
	if at, ok := s.take(api); !ok || !at.Equal(t0) {
		t.Fatalf("take = %v, %v; want %v, true", at, ok, t0)
	}
	if _, ok := s.take(api); ok {
		t.Fatal("a taken pod is still kept")
	}
	gone := &corev1.Pod{}
	gone.UID = "gone"
	s.note(gone, t0)
	s.forget(gone.UID)
	mirror := &corev1.Pod{}
	mirror.UID = "mirror"
	mirror.Annotations = map[string]string{podrules.ConfigMirrorAnnotation: "hash"}
	s.note(mirror, t0)
	if len(s.at) != 0 {
		t.Fatalf("kept %v, want nothing", s.at)
	}
	static := &corev1.Pod{}
	static.UID = "static"
	static.Annotations = map[string]string{podrules.ConfigSourceAnnotation: "file",
		podrules.ConfigSeenAnnotation: t0.Format(time.RFC3339Nano)}
	if at, ok := s.take(static); !ok || !at.Equal(t0) {
		t.Fatalf("static take = %v, %v; want %v, true", at, ok, t0)
	}
}

// kubelet_pod_worker_start_duration_seconds is the time from the pod's arrival to its worker's first sync,
// and that sync is kubelet_pod_worker_duration_seconds{operation_type="create"}; later ones are "sync".
func TestWorkerStartDuration(t *testing.T) {
	b := newLifecycleBed(t)
	pod := bedPod("etcd", func(p *corev1.Pod) {
		p.Annotations = map[string]string{podrules.ConfigSourceAnnotation: "file",
			podrules.ConfigSeenAnnotation: b.clk.Now().Add(-3 * time.Second).Format(time.RFC3339Nano)}
	})
	b.startStatic(pod)
	var h dto.Metric
	if err := b.r.metrics.workerStart.Write(&h); err != nil {
		t.Fatal(err)
	}
	if n, sum := h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum(); n != 1 || sum != 3 {
		t.Fatalf("kubelet_pod_worker_start_duration_seconds: %d samples summing to %v, want 1 of 3", n, sum)
	}
	for op, want := range map[string]int{opCreate: 1, opSync: 1} {
		var m dto.Metric
		if err := b.r.metrics.workerDuration.WithLabelValues(op).(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		if n := m.GetHistogram().GetSampleCount(); n != uint64(want) {
			t.Fatalf("kubelet_pod_worker_duration_seconds{operation_type=%q}: %d samples, want %d", op, n, want)
		}
	}
}
