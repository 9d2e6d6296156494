package volumes

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
)

func TestVolumeManagerMetrics(t *testing.T) {
	env := newTestEnv(t)
	reg := prometheus.NewRegistry()
	if err := env.m.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	env.objects.addConfigMap("ns", "cfg", map[string]string{"a": "A"})
	pod := newPod(vol("scratch", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}), vol("cfg", cmSource("cfg")),
		vol("missing", cmSource("nope")))
	for range 2 {
		_ = env.m.SetUp(context.Background(), pod)
	}
	// The emptyDir is mounted once; a configMap is refreshed on every sync, and one that cannot be read fails
	// each time.
	want := `
# HELP volume_manager_total_volumes Number of volumes in Volume Manager
# TYPE volume_manager_total_volumes gauge
volume_manager_total_volumes{plugin_name="kubernetes.io/configmap",state="actual_state_of_world"} 1
volume_manager_total_volumes{plugin_name="kubernetes.io/configmap",state="desired_state_of_world"} 2
volume_manager_total_volumes{plugin_name="kubernetes.io/empty-dir",state="actual_state_of_world"} 1
volume_manager_total_volumes{plugin_name="kubernetes.io/empty-dir",state="desired_state_of_world"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "volume_manager_total_volumes"); err != nil {
		t.Error(err)
	}
	count := func(plugin, status string) int {
		n, err := testutil.GatherAndCount(reg, "storage_operation_duration_seconds")
		if err != nil || n == 0 {
			t.Fatalf("no storage_operation_duration_seconds series: %v", err)
		}
		fams, _ := reg.Gather()
		for _, f := range fams {
			if f.GetName() != "storage_operation_duration_seconds" {
				continue
			}
			for _, m := range f.GetMetric() {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				if l["volume_plugin"] == plugin && l["status"] == status && l["operation_name"] == "volume_mount" && l["migrated"] == "false" {
					return int(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return 0
	}
	for _, c := range []struct {
		plugin, status string
		want           int
	}{{"kubernetes.io/empty-dir", "success", 1}, {"kubernetes.io/configmap", "success", 2}, {"kubernetes.io/configmap", "fail-unknown", 2}} {
		if got := count(c.plugin, c.status); got != c.want {
			t.Errorf("volume_mount of %s, %s: %d, want %d", c.plugin, c.status, got, c.want)
		}
	}
	if err := env.m.TearDown(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "volume_manager_total_volumes"); err != nil || n != 0 {
		t.Errorf("volumes counted after the pod's teardown: %d, %v", n, err)
	}
}

func TestManagersOfOneProcessShareTheVolumeMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := newTestEnv(t), newTestEnv(t)
	if err := a.m.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if err := b.m.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if a.m.metrics.operations != b.m.metrics.operations {
		t.Error("the second manager records into a histogram of its own, not served")
	}
}
