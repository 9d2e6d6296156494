package server

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/machine"
)

// Without cgroups, /metrics/cadvisor answers cAdvisor's container families from the runtime's stats,
// labelled as cAdvisor labels the kubelet's containers.
func TestCadvisorMetricsFromRuntimeStats(t *testing.T) {
	e, _ := newStatsEnv(t)
	code, body := e.do("GET", "/metrics/cadvisor", "stats-token")
	if code != 200 {
		t.Fatalf("GET /metrics/cadvisor = %d %q", code, body)
	}
	for _, want := range []string{
		`container_cpu_usage_seconds_total{container="app",cpu="total",id="/c1",image="busybox",name="c1",namespace="default",pod="web"} 2`,
		`container_memory_working_set_bytes{container="side",id="/c2",image="",name="c2",namespace="default",pod="web"} 500`,
		`container_fs_usage_bytes{container="app",device="",id="/c1",image="busybox",name="c1",namespace="default",pod="web"} 4096`,
		`container_scrape_error 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
}

// fakeCgroups is a cgroup tree with fixed figures.
type fakeCgroups map[string]machine.CgroupStats

func (f fakeCgroups) Cgroups(root string) ([]string, error) {
	var out []string
	for p := range f {
		if p == root || strings.HasPrefix(p, root+"/") {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f fakeCgroups) CgroupStats(p string) (machine.CgroupStats, error) {
	st, ok := f[p]
	if !ok {
		return st, fs.ErrNotExist
	}
	st.Path = p
	return st, nil
}

// With cgroups, every cgroup of the root and the pods' tree is reported with cAdvisor's figures, a pod's
// cgroup under its pod's name, a container's under its container's labels, a sandbox's under its ID; the
// systemd driver's names are recognised; machine_* families come from the machine's facts.
func TestCadvisorMetricsFromCgroups(t *testing.T) {
	const uid = "4927213c-41fe-45d6-9d7b-018c00486ef8"
	app, sb := strings.Repeat("a", 64), strings.Repeat("b", 64)
	podDir := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	created := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	cg := fakeCgroups{
		"/":               {CPUUsageNanos: 100e9, MemoryUsage: 8 << 30, MemoryWorkingSet: 6 << 30, Created: created},
		"/kubepods.slice": {CPUUsageNanos: 10e9, Created: created},
		"/kubepods.slice/kubepods-burstable.slice": {CPUShares: 1024, Created: created},
		podDir: {CPUUsageNanos: 3e9, CPUShares: 46, CPUPeriod: 100000, CPUQuota: 4500, MemoryLimit: 78643200,
			CFSPeriods: 10, CFSThrottledPeriods: 4, CFSThrottledNanos: 2e9, Threads: 8, Created: created},
		podDir + "/cri-containerd-" + app + ".scope": {CPUUsageNanos: 2e9, CPUUserNanos: 1e9, MemoryWorkingSet: 2 << 20,
			MemoryRSS: 1 << 20, PgFault: 7, HierarchyPgFault: 9, Processes: 1},
		podDir + "/cri-containerd-" + sb + ".scope": {CPUUsageNanos: 1e7},
	}
	e := newEnv(t, func(o *Options) {
		o.Cgroups = cg
		o.KubepodsCgroup = "/kubepods.slice"
		o.Machine = func() (MachineFacts, error) {
			return MachineFacts{Info: machine.Info{NumCPU: 2, MemoryBytes: 8 << 30, BootID: "b", MachineID: "m", SystemUUID: "s"},
				PhysicalCores: 2, CPUSockets: 1}, nil
		}
	})
	e.addUser("stats-token", "monitor", "get metrics")
	pod := testPod("web", uid)
	e.pods.add(pod)
	t0 := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	e.rt.sandboxes = []*runtimeapi.PodSandbox{{Id: sb, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: t0.UnixNano(),
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: uid}}}
	e.rt.addContainer(app, sb, &pod, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, t0.Add(time.Second).UnixNano(), "")
	e.rt.containers[app].Image = &runtimeapi.ImageSpec{Image: "sha256:1234", UserSpecifiedImage: "busybox"}
	e.rt.stats = []*runtimeapi.ContainerStats{containerStat(app, "app", t0.UnixNano(), 5e9, 1000, 4096)}

	code, body := e.do("GET", "/metrics/cadvisor", "stats-token")
	if code != 200 {
		t.Fatalf("GET /metrics/cadvisor = %d %q", code, body)
	}
	ctr := fmt.Sprintf(`container="app",id="%s/cri-containerd-%s.scope",image="busybox",name="%s",namespace="default",pod="web"`, podDir, app, app)
	podL := fmt.Sprintf(`container="",id="%s",image="",name="",namespace="default",pod="web"`, podDir)
	for _, want := range []string{
		`container_cpu_usage_seconds_total{container="",cpu="total",id="/",image="",name="",namespace="",pod=""} 100`,
		`container_memory_working_set_bytes{container="",id="/",image="",name="",namespace="",pod=""} 6.442450944e+09`,
		`container_cpu_usage_seconds_total{container="",cpu="total",id="/kubepods.slice",image="",name="",namespace="",pod=""} 10`,
		`container_spec_cpu_shares{container="",id="/kubepods.slice/kubepods-burstable.slice",image="",name="",namespace="",pod=""} 1024`,
		`container_cpu_usage_seconds_total{` + podL[:strings.Index(podL, ",id=")] + `,cpu="total"` + podL[strings.Index(podL, ",id="):] + `} 3`,
		`container_spec_cpu_quota{` + podL + `} 4500`,
		`container_spec_memory_limit_bytes{` + podL + `} 7.86432e+07`,
		`container_cpu_cfs_throttled_periods_total{` + podL + `} 4`,
		`container_cpu_cfs_throttled_seconds_total{` + podL + `} 2`,
		`container_threads{` + podL + `} 8`,
		`container_start_time_seconds{` + podL + `} ` + fmt.Sprint(float64(created.Unix())),
		`container_memory_working_set_bytes{` + ctr + `} 2.097152e+06`,
		`container_cpu_user_seconds_total{` + ctr + `} 1`,
		`container_processes{` + ctr + `} 1`,
		`container_start_time_seconds{` + ctr + `} ` + fmt.Sprint(float64(t0.Add(time.Second).Unix())),
		`container_fs_usage_bytes{` + ctr[:strings.Index(ctr, ",id=")] + `,device=""` + ctr[strings.Index(ctr, ",id="):] + `} 4096`,
		fmt.Sprintf(`container_cpu_usage_seconds_total{container="",cpu="total",id="%s/cri-containerd-%s.scope",image="",name="%s",namespace="default",pod="web"} 0.01`, podDir, sb, sb),
		`machine_cpu_cores{boot_id="b",machine_id="m",system_uuid="s"} 2`,
		`machine_memory_bytes{boot_id="b",machine_id="m",system_uuid="s"} 8.589934592e+09`,
		`container_scrape_error 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
	if strings.Contains(body, `container_spec_cpu_quota{container="",id="/"`) {
		t.Errorf("a cgroup without a CFS quota has container_spec_cpu_quota:\n%s", body)
	}
}
