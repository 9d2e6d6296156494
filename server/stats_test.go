package server

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// statsEnv has pod default/web (uid u1) with containers app and side running, node figures from a
// reader whose CPU reading advances by one core-second per call, one second apart.
func newStatsEnv(t *testing.T) (*env, *int) {
	calls := new(int)
	t0 := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "nodelet_test_total", Help: "test"}))
	e := newEnv(t, func(o *Options) {
		o.Metrics = reg
		o.PodProcesses = func(uid types.UID) (uint64, bool) { return 3, uid == "u1" }
		o.PodVolumeStats = func(types.UID) []statsapi.VolumeStats {
			used := uint64(4096)
			return []statsapi.VolumeStats{{Name: "scratch", FsStats: statsapi.FsStats{UsedBytes: &used}}}
		}
		o.NodeStats = func(context.Context) (NodeStats, error) {
			*calls++
			at := metav1.NewTime(t0.Add(time.Duration(*calls) * time.Second))
			return NodeStats{
				StartTime: t0.Add(-time.Hour),
				CPU:       statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: ptr.To(uint64(*calls) * 1e9)},
				Memory:    statsapi.MemoryStats{Time: at, WorkingSetBytes: ptr.To(uint64(123456)), AvailableBytes: ptr.To(uint64(1 << 30))},
				Fs:        statsapi.FsStats{Time: at, CapacityBytes: ptr.To(uint64(1 << 40)), AvailableBytes: ptr.To(uint64(1 << 39))},
			}, nil
		}
	})
	e.addUser("stats-token", "monitor", "get stats", "get metrics", "get pods", "get configz")
	pod := testPod("web", "u1")
	e.pods.add(pod)
	e.rt.sandboxes = []*runtimeapi.PodSandbox{{Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: t0.UnixNano(),
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1"}}}
	e.rt.addContainer("c1", "sb1", &pod, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, t0.UnixNano(), "")
	e.rt.addContainer("c2", "sb1", &pod, "side", runtimeapi.ContainerState_CONTAINER_RUNNING, t0.UnixNano(), "")
	ts := t0.UnixNano()
	e.rt.stats = []*runtimeapi.ContainerStats{
		containerStat("c1", "app", ts, 2e9, 1000, 4096),
		containerStat("c2", "side", ts, 1e9, 500, 0),
	}
	e.rt.imageFs = &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp: ts, UsedBytes: &runtimeapi.UInt64Value{Value: 7e9}, InodesUsed: &runtimeapi.UInt64Value{Value: 300}}}}
	writeFile(t, filepath.Join(e.s.opts.PodLogsDir, "default_web_u1", "app", "0.log"), make([]byte, 100))
	return e, calls
}

func containerStat(id, name string, ts int64, cpu, ws, rootfs uint64) *runtimeapi.ContainerStats {
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name}},
		Cpu:        &runtimeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpu}},
		Memory:     &runtimeapi.MemoryUsage{Timestamp: ts, WorkingSetBytes: &runtimeapi.UInt64Value{Value: ws}},
		WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: ts, UsedBytes: &runtimeapi.UInt64Value{Value: rootfs},
			InodesUsed: &runtimeapi.UInt64Value{Value: 10}},
	}
}

func getSummary(t *testing.T, e *env, query string) statsapi.Summary {
	t.Helper()
	code, body := e.do("GET", "/stats/summary"+query, "stats-token")
	if code != 200 {
		t.Fatalf("GET /stats/summary = %d %q", code, body)
	}
	var sum statsapi.Summary
	if err := json.Unmarshal([]byte(body), &sum); err != nil {
		t.Fatalf("decode summary: %v", err)
	}
	return sum
}

func TestStatsSummary(t *testing.T) {
	e, _ := newStatsEnv(t)
	sum := getSummary(t, e, "")
	n := sum.Node
	if n.NodeName != testNode || *n.CPU.UsageCoreNanoSeconds != 1e9 || *n.Memory.WorkingSetBytes != 123456 ||
		*n.Fs.CapacityBytes != 1<<40 || *n.Runtime.ImageFs.UsedBytes != 7e9 || n.CPU.UsageNanoCores != nil {
		t.Errorf("node stats = %+v", n)
	}
	if len(sum.Pods) != 1 {
		t.Fatalf("pods = %+v, want web", sum.Pods)
	}
	p := sum.Pods[0]
	if p.PodRef != (statsapi.PodReference{Name: "web", Namespace: "default", UID: "u1"}) || len(p.Containers) != 2 {
		t.Fatalf("pod stats = %+v", p)
	}
	if *p.CPU.UsageCoreNanoSeconds != 3e9 || *p.Memory.WorkingSetBytes != 1500 {
		t.Errorf("pod cpu %d memory %d, want the containers' sums 3e9 and 1500", *p.CPU.UsageCoreNanoSeconds, *p.Memory.WorkingSetBytes)
	}
	if len(p.VolumeStats) != 1 || p.VolumeStats[0].Name != "scratch" {
		t.Errorf("pod volume stats %+v", p.VolumeStats)
	}
	if p.ProcessStats == nil || *p.ProcessStats.ProcessCount != 3 {
		t.Errorf("pod process stats %+v, want the pod cgroup's 3", p.ProcessStats)
	}
	if *p.EphemeralStorage.UsedBytes != 4096+100 {
		t.Errorf("pod ephemeral storage %d, want writable layers plus logs (4196)", *p.EphemeralStorage.UsedBytes)
	}
	app := p.Containers[0]
	if app.Name != "app" || *app.CPU.UsageCoreNanoSeconds != 2e9 || *app.Rootfs.UsedBytes != 4096 || *app.Logs.UsedBytes != 100 {
		t.Errorf("container stats = %+v", app)
	}
	if sum = getSummary(t, e, ""); sum.Node.CPU.UsageNanoCores == nil || *sum.Node.CPU.UsageNanoCores != 1e9 {
		t.Errorf("second reading: node usageNanoCores = %v, want 1e9 (one core-second in one second)", sum.Node.CPU.UsageNanoCores)
	}
}

// A pod's ephemeral storage counts its local ephemeral volumes (a disk emptyDir, a configMap), as the
// kubelet's summary: not a memory-backed emptyDir, a secret or a volume the spec does not name.
func TestStatsSummaryEphemeralStorageCountsLocalVolumes(t *testing.T) {
	e, _ := newStatsEnv(t)
	vol := func(name string, src corev1.VolumeSource) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: src}
	}
	e.pods.mu.Lock()
	e.pods.pods[0].Spec.Volumes = []corev1.Volume{
		vol("scratch", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
		vol("cache", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}),
		vol("config", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}),
		vol("creds", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}),
	}
	e.pods.mu.Unlock()
	e.s.opts.PodVolumeStats = func(types.UID) []statsapi.VolumeStats {
		v := func(name string, used uint64) statsapi.VolumeStats {
			return statsapi.VolumeStats{Name: name, FsStats: statsapi.FsStats{UsedBytes: &used, InodesUsed: ptr.To(uint64(1))}}
		}
		return []statsapi.VolumeStats{v("scratch", 1<<20), v("cache", 1<<30), v("config", 8192), v("creds", 1<<30), v("gone", 1<<30)}
	}
	p := getSummary(t, e, "").Pods[0]
	if want := uint64(4096 + 100 + 1<<20 + 8192); p.EphemeralStorage == nil || *p.EphemeralStorage.UsedBytes != want {
		t.Errorf("pod ephemeral storage %+v, want writable layers, logs, scratch and config (%d)", p.EphemeralStorage, want)
	}
	if len(p.VolumeStats) != 5 {
		t.Errorf("volume stats %+v: every measured volume is reported", p.VolumeStats)
	}
}

func TestStatsSummaryCPUAndMemoryOnly(t *testing.T) {
	e, _ := newStatsEnv(t)
	e.rt.sandboxStats = []*runtimeapi.PodSandboxStats{{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: "sb1"},
		Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu:    &runtimeapi.CpuUsage{Timestamp: 1, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 4e9}},
			Memory: &runtimeapi.MemoryUsage{Timestamp: 1, WorkingSetBytes: &runtimeapi.UInt64Value{Value: 2000}},
		},
	}}
	sum := getSummary(t, e, "?only_cpu_and_memory=true")
	p := sum.Pods[0]
	if sum.Node.Fs != nil || sum.Node.Runtime != nil || p.EphemeralStorage != nil || p.Containers[0].Rootfs != nil {
		t.Errorf("only_cpu_and_memory still reports filesystems: %+v", sum)
	}
	if *p.CPU.UsageCoreNanoSeconds != 4e9 || *p.Memory.WorkingSetBytes != 2000 {
		t.Errorf("pod figures %d %d, want the sandbox's own 4e9 and 2000", *p.CPU.UsageCoreNanoSeconds, *p.Memory.WorkingSetBytes)
	}
}

func TestResourceMetrics(t *testing.T) {
	e, _ := newStatsEnv(t)
	code, body := e.do("GET", "/metrics/resource", "stats-token")
	if code != 200 {
		t.Fatalf("GET /metrics/resource = %d %q", code, body)
	}
	ms := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC).UnixMilli()
	for _, want := range []string{
		"node_cpu_usage_seconds_total 1 ",
		"node_memory_working_set_bytes 123456 ",
		`container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2 ` + strconv.FormatInt(ms, 10),
		`container_memory_working_set_bytes{container="side",namespace="default",pod="web"} 500 ` + strconv.FormatInt(ms, 10),
		`container_start_time_seconds{container="app",namespace="default",pod="web"} `,
		`pod_cpu_usage_seconds_total{namespace="default",pod="web"} 3 `,
		`pod_memory_working_set_bytes{namespace="default",pod="web"} 1500 `,
		"scrape_error 0",
	} {
		contains(t, body, want)
	}
	e.s.opts.NodeStats = func(context.Context) (NodeStats, error) { return NodeStats{}, errors.New("no /proc") }
	_, body = e.do("GET", "/metrics/resource", "stats-token")
	contains(t, body, "scrape_error 1")
}

func TestPodsConfigzMetricsAndHealthz(t *testing.T) {
	e, _ := newStatsEnv(t)
	code, body := e.do("GET", "/pods", "stats-token")
	var list corev1.PodList
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || list.Kind != "PodList" ||
		list.APIVersion != "v1" || len(list.Items) != 1 || list.Items[0].Name != "web" {
		t.Errorf("GET /pods = %d %q", code, body)
	}
	if code, body := e.do("GET", "/configz", "stats-token"); code != 200 || body != `{"kubeletconfig":{"kind":"KubeletConfiguration"}}` {
		t.Errorf("GET /configz = %d %q", code, body)
	}
	if code, body := e.do("GET", "/metrics", "stats-token"); code != 200 || !strings.Contains(body, "nodelet_test_total 0") {
		t.Errorf("GET /metrics = %d %q", code, body)
	}
	e.mu.Lock()
	e.allow("monitor", "get healthz")
	e.mu.Unlock()
	if code, body := e.do("GET", "/healthz", "stats-token"); code != 200 || body != "ok" {
		t.Errorf("GET /healthz = %d %q", code, body)
	}
	if code, _ := e.do("GET", "/debug/pprof/", "stats-token"); code != 403 {
		t.Errorf("GET /debug/pprof/ = %d, want 403 (nodes/proxy, which this user lacks)", code)
	}
}
