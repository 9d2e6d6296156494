package timeline

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestTimeline(t *testing.T) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(created.Add(time.Second))
	r := NewRecorder(clk)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", CreationTimestamp: metav1.NewTime(created)}}
	r.Mark(pod, Admitted, "")
	clk.Step(200 * time.Millisecond)
	r.Mark(pod, SandboxReady, "")
	clk.Step(300 * time.Millisecond)
	r.Mark(pod, ContainerStarted, "app")
	clk.Step(time.Second)
	r.Mark(pod, ContainerStarted, "app") // a restart is not the start
	r.Mark(pod, Ready, "")

	tl, ok := r.Get("ns", "web")
	if !ok || tl.UID != "u1" || len(tl.Events) != 4 {
		t.Fatalf("timeline %+v, %v; want 4 events of u1", tl, ok)
	}
	want := []struct {
		phase              Phase
		container          string
		creation, admitted float64
	}{{Admitted, "", 1, 0}, {SandboxReady, "", 1.2, 0.2}, {ContainerStarted, "app", 1.5, 0.5}, {Ready, "", 2.5, 1.5}}
	for i, w := range want {
		e := tl.Events[i]
		if e.Phase != w.phase || e.Container != w.container || !near(e.SinceCreation, w.creation) || !near(e.SinceAdmission, w.admitted) {
			t.Errorf("event %d = %+v, want %+v", i, e, w)
		}
	}
	if n := testutil.CollectAndCount(r.hist); n != 4 {
		t.Errorf("%d phase series, want 4", n)
	}
	r.Forget("u1")
	if _, ok := r.Get("ns", "web"); ok {
		t.Error("a forgotten pod's timeline is still served")
	}
}

func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }
