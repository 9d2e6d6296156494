package machine

import (
	"reflect"
	"testing"
)

// A cgroup's figures are read as cAdvisor reads them, on cgroup v1 (memory, cpu, cpuacct and pids
// hierarchies) and v2 (one directory): CPU times in nanoseconds, working set = usage - inactive file, no
// limit as 0, cpu.weight back to shares.
func TestCgroupStats(t *testing.T) {
	const pod = "/kubepods/burstable/pod1"
	for name, tc := range map[string]struct {
		files map[string]string
		want  CgroupStats
	}{
		"v1": {map[string]string{
			"sys/fs/cgroup/memory" + pod + "/memory.usage_in_bytes":       "10000\n",
			"sys/fs/cgroup/memory" + pod + "/memory.max_usage_in_bytes":   "20000\n",
			"sys/fs/cgroup/memory" + pod + "/memory.failcnt":              "3\n",
			"sys/fs/cgroup/memory" + pod + "/memory.limit_in_bytes":       "78643200\n",
			"sys/fs/cgroup/memory" + pod + "/memory.soft_limit_in_bytes":  "9223372036854771712\n",
			"sys/fs/cgroup/memory" + pod + "/memory.memsw.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory" + pod + "/memory.oom_control":          "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
			"sys/fs/cgroup/memory" + pod + "/memory.stat":                 "rss 1\ntotal_rss 4000\ntotal_cache 5000\ntotal_mapped_file 600\ntotal_swap 0\ntotal_active_file 700\ntotal_inactive_file 3000\npgfault 11\npgmajfault 1\ntotal_pgfault 22\ntotal_pgmajfault 2\n",
			"sys/fs/cgroup/cpuacct" + pod + "/cpuacct.usage":              "2500000000\n",
			"sys/fs/cgroup/cpuacct" + pod + "/cpuacct.stat":               "user 150\nsystem 50\n",
			"sys/fs/cgroup/cpu" + pod + "/cpu.stat":                       "nr_periods 10\nnr_throttled 4\nthrottled_time 2000000000\n",
			"sys/fs/cgroup/cpu" + pod + "/cpu.shares":                     "46\n",
			"sys/fs/cgroup/cpu" + pod + "/cpu.cfs_period_us":              "100000\n",
			"sys/fs/cgroup/cpu" + pod + "/cpu.cfs_quota_us":               "4500\n",
			"sys/fs/cgroup/pids" + pod + "/cgroup.procs":                  "1\n2\n",
			"sys/fs/cgroup/pids" + pod + "/tasks":                         "1\n2\n3\n",
			"sys/fs/cgroup/pids" + pod + "/pids.max":                      "max\n",
		}, CgroupStats{Path: pod, CPUUsageNanos: 2.5e9, CPUUserNanos: 1.5e9, CPUSystemNanos: 0.5e9, CFSPeriods: 10,
			CFSThrottledPeriods: 4, CFSThrottledNanos: 2e9, MemoryUsage: 10000, MemoryMaxUsage: 20000, MemoryWorkingSet: 7000,
			MemoryRSS: 4000, MemoryCache: 5000, MemoryMappedFile: 600, MemoryActiveFile: 700, MemoryInactiveFile: 3000,
			MemoryFailcnt: 3, PgFault: 11, PgMajFault: 1, HierarchyPgFault: 22, HierarchyPgMajFault: 2, OOMEvents: 2,
			CPUShares: 46, CPUPeriod: 100000, CPUQuota: 4500, MemoryLimit: 78643200, Processes: 2, Threads: 3}},
		"v2": {map[string]string{
			"sys/fs/cgroup/cgroup.controllers":         "cpu memory pids\n",
			"sys/fs/cgroup" + pod + "/cpu.stat":        "usage_usec 2500000\nuser_usec 1500000\nsystem_usec 1000000\nnr_periods 10\nnr_throttled 4\nthrottled_usec 2000000\n",
			"sys/fs/cgroup" + pod + "/cpu.weight":      "2\n",
			"sys/fs/cgroup" + pod + "/cpu.max":         "4500 100000\n",
			"sys/fs/cgroup" + pod + "/memory.current":  "10000\n",
			"sys/fs/cgroup" + pod + "/memory.peak":     "20000\n",
			"sys/fs/cgroup" + pod + "/memory.max":      "78643200\n",
			"sys/fs/cgroup" + pod + "/memory.low":      "0\n",
			"sys/fs/cgroup" + pod + "/memory.swap.max": "max\n",
			"sys/fs/cgroup" + pod + "/memory.events":   "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n",
			"sys/fs/cgroup" + pod + "/memory.stat":     "anon 4000\nfile 5000\nfile_mapped 600\nactive_file 700\ninactive_file 3000\npgfault 22\npgmajfault 2\n",
			"sys/fs/cgroup" + pod + "/cgroup.procs":    "1\n2\n",
			"sys/fs/cgroup" + pod + "/cgroup.threads":  "1\n2\n3\n",
			"sys/fs/cgroup" + pod + "/pids.max":        "100\n",
		}, CgroupStats{Path: pod, CPUUsageNanos: 2.5e9, CPUUserNanos: 1.5e9, CPUSystemNanos: 1e9, CFSPeriods: 10,
			CFSThrottledPeriods: 4, CFSThrottledNanos: 2e9, MemoryUsage: 10000, MemoryMaxUsage: 20000, MemoryWorkingSet: 7000,
			MemoryRSS: 4000, MemoryCache: 5000, MemoryMappedFile: 600, MemoryActiveFile: 700, MemoryInactiveFile: 3000,
			MemoryFailcnt: 3, PgFault: 22, PgMajFault: 2, HierarchyPgFault: 22, HierarchyPgMajFault: 2, OOMEvents: 2,
			CPUShares: 28, CPUPeriod: 100000, CPUQuota: 4500, MemoryLimit: 78643200, Processes: 2, Threads: 3, ThreadsMax: 100, EventsMax: 3}},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, tc.files)
			r := Reader{HostRoot: root}
			got, err := r.CgroupStats(pod)
			if err != nil {
				t.Fatal(err)
			}
			if got.Created.IsZero() {
				t.Errorf("no creation time")
			}
			got.Created = tc.want.Created
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			list, err := r.Cgroups("/kubepods")
			if err != nil || !reflect.DeepEqual(list, []string{"/kubepods", "/kubepods/burstable", pod}) {
				t.Errorf("Cgroups(/kubepods) = %v, %v", list, err)
			}
			if list, err := r.Cgroups("/nothing"); err != nil || len(list) != 0 {
				t.Errorf("Cgroups(/nothing) = %v, %v; want none", list, err)
			}
		})
	}
}

// The host's interfaces are read from /proc/net/dev without the loopback and veth ends.
func TestNetDev(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"proc/net/dev": `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0: 857336183 600000 3 0    0     0          0         0 12345678  90000    5    0    0     0       0          0
veth1234: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0
`})
	got, err := Reader{HostRoot: root}.NetDev()
	want := []NetInterface{{Name: "eth0", RxBytes: 857336183, RxErrors: 3, TxBytes: 12345678, TxErrors: 5}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("NetDev() = %+v, %v; want %+v", got, err, want)
	}
}
