package probes

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	totalHeader = `# HELP prober_probe_total [BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.
# TYPE prober_probe_total counter
`
	durationHeader = `# HELP prober_probe_duration_seconds [ALPHA] Duration in seconds for a probe response.
# TYPE prober_probe_duration_seconds histogram
`
)

// newMetricsHarness is a harness recording into the kubelet's prober metrics; the "ready" exec probe takes
// took on the fake clock.
func newMetricsHarness(t *testing.T, took time.Duration) (*harness, *Metrics) {
	h := newHarness(t)
	metrics := NewMetrics()
	h.m.Metrics = metrics
	h.exec.onCall = func(_ string, cmd []string) {
		if cmd[0] == "ready" {
			h.clock.Step(took)
		}
	}
	return h, metrics
}

// seriesCount is how many series of name metrics holds.
func seriesCount(metrics *Metrics, name string) int { return testutil.CollectAndCount(metrics, name) }

// TestProbeRunsAreRecordedAsTheKubelet: a success is counted "successful" and its duration (on the injected
// clock) observed in the kubelet's buckets; a failure is counted "failed" without a duration; the labels
// are the kubelet's.
func TestProbeRunsAreRecordedAsTheKubelet(t *testing.T) {
	h, metrics := newMetricsHarness(t, 300*time.Millisecond)
	h.exec.set("ready", 0, "")
	h.exec.set("live", 1, "boom")
	h.m.Sync(newPod(execProbe("live", 3, 1), execProbe("ready", 3, 1), nil), []string{"10.88.0.5"},
		[]ContainerInfo{running("app", "c1")})
	eventually(t, "both probes recorded", func() bool { return seriesCount(metrics, "prober_probe_total") == 2 })

	want := totalHeader +
		`prober_probe_total{container="app",namespace="ns",pod="web",pod_uid="uid-1",probe_type="Liveness",result="failed"} 1
prober_probe_total{container="app",namespace="ns",pod="web",pod_uid="uid-1",probe_type="Readiness",result="successful"} 1
` + durationHeader +
		`prober_probe_duration_seconds_bucket{container="app",namespace="ns",pod="web",probe_type="Readiness",le="0.005"} 0
prober_probe_duration_seconds_bucket{container="app",namespace="ns",pod="web",probe_type="Readiness",le="0.01"} 0
prober_probe_duration_seconds_bucket{container="app",namespace="ns",pod="web",probe_type="Readiness",le="0.025"} 0
prober_probe_duration_seconds_bucket{container="app",namespace="ns",pod="web",probe_type="Readiness",le="0.05"} 0
prober_probe_duration_seconds_bucket{container="app",namespace="ns",pod="web",probe_type="Readiness",le="0.1"} 0
prober_probe_duration_seconds_bucket{container="app",namespace="ns",pod="web",probe_type="Readiness",le="0.25"} 0
prober_probe_duration_seconds_bucket{container="app",namespace="ns",pod="web",probe_type="Readiness",le="0.5"} 1
prober_probe_duration_seconds_bucket{container="app",namespace="ns",pod="web",probe_type="Readiness",le="1"} 1
prober_probe_duration_seconds_bucket{container="app",namespace="ns",pod="web",probe_type="Readiness",le="2.5"} 1
prober_probe_duration_seconds_bucket{container="app",namespace="ns",pod="web",probe_type="Readiness",le="5"} 1
prober_probe_duration_seconds_bucket{container="app",namespace="ns",pod="web",probe_type="Readiness",le="10"} 1
prober_probe_duration_seconds_bucket{container="app",namespace="ns",pod="web",probe_type="Readiness",le="+Inf"} 1
prober_probe_duration_seconds_sum{container="app",namespace="ns",pod="web",probe_type="Readiness"} 0.3
prober_probe_duration_seconds_count{container="app",namespace="ns",pod="web",probe_type="Readiness"} 1
`
	if err := testutil.CollectAndCompare(metrics, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestProbeRunsAreCountedOnEachRun: every period's run counts, past the thresholds.
func TestProbeRunsAreCountedOnEachRun(t *testing.T) {
	h, metrics := newMetricsHarness(t, 10*time.Millisecond)
	h.m.Sync(newPod(nil, execProbe("ready", 3, 1), nil), nil, []ContainerInfo{running("app", "c1")})
	for i := 1; i <= 3; i++ {
		if i > 1 {
			h.step(10 * time.Second)
		}
		eventually(t, "a recorded run", func() bool {
			return testutil.ToFloat64(metrics.total.WithLabelValues("Readiness", ResultSuccessful, "app", "web", "ns", "uid-1")) == float64(i)
		})
	}
}

// TestErroredProbeIsNotRecorded: a probe that could not be run is thrown away, not counted, as the kubelet;
// the next run that gives a result is.
func TestErroredProbeIsNotRecorded(t *testing.T) {
	h, metrics := newMetricsHarness(t, 0)
	h.exec.mu.Lock()
	h.exec.script("ready").err = errors.New("runtime down")
	h.exec.mu.Unlock()
	h.m.Sync(newPod(nil, execProbe("ready", 3, 1), nil), nil, []ContainerInfo{running("app", "c1")})
	eventually(t, "the probe to be tried", func() bool { return h.exec.calls("ready") == maxRetries })
	h.exec.mu.Lock()
	h.exec.script("ready").err = nil
	h.exec.mu.Unlock()
	h.step(10 * time.Second)
	eventually(t, "the next run recorded", func() bool { return seriesCount(metrics, "prober_probe_total") > 0 })
	want := totalHeader +
		`prober_probe_total{container="app",namespace="ns",pod="web",pod_uid="uid-1",probe_type="Readiness",result="successful"} 1
`
	if err := testutil.CollectAndCompare(metrics, strings.NewReader(want), "prober_probe_total"); err != nil {
		t.Error(err)
	}
}

// TestSeriesAreDroppedWithThePod: a removed pod's series are gone; liveness and startup series go when the
// pod is being deleted (their probes stop), readiness ones stay until the pod is removed.
func TestSeriesAreDroppedWithThePod(t *testing.T) {
	h, metrics := newMetricsHarness(t, 0)
	pod := newPod(execProbe("live", 3, 1), execProbe("ready", 3, 1), nil)
	h.m.Sync(pod, nil, []ContainerInfo{running("app", "c1")})
	eventually(t, "both probes recorded", func() bool { return seriesCount(metrics, "prober_probe_total") == 2 })

	deleting := pod.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	h.m.Sync(deleting, nil, []ContainerInfo{running("app", "c1")})
	if n := seriesCount(metrics, "prober_probe_total"); n != 1 {
		t.Fatalf("%d series while the pod is deleted, want the readiness one", n)
	}
	h.m.RemovePod(pod.UID)
	if n := seriesCount(metrics, "prober_probe_total") + seriesCount(metrics, "prober_probe_duration_seconds"); n != 0 {
		t.Errorf("%d series after RemovePod, want none", n)
	}
}

// TestSeriesOutliveAContainerRestart: a new attempt of the container keeps counting in the same series.
func TestSeriesOutliveAContainerRestart(t *testing.T) {
	h, metrics := newMetricsHarness(t, 0)
	pod := newPod(nil, execProbe("ready", 3, 1), nil)
	h.m.Sync(pod, nil, []ContainerInfo{running("app", "c1")})
	counter := metrics.total.WithLabelValues("Readiness", ResultSuccessful, "app", "web", "ns", "uid-1")
	eventually(t, "the first attempt's run", func() bool { return testutil.ToFloat64(counter) == 1 })
	h.m.Sync(pod, nil, []ContainerInfo{{Name: "app", ID: "c2", StartedAt: t0, Running: true}})
	eventually(t, "the second attempt's run", func() bool { return testutil.ToFloat64(counter) == 2 })
}
