package machine

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CgroupStats is one cgroup's figures, with the meaning cAdvisor gives them (what the kubelet's
// /metrics/cadvisor serves): cumulative CPU times in nanoseconds, memory in bytes, the cgroup's limits as
// its spec. A figure the kernel does not have on this cgroup version is 0.
type CgroupStats struct {
	// Path is the cgroup's path below the hierarchy's root ("/" for the root).
	Path string
	// Created is when the cgroup's directory was made (its change time).
	Created time.Time

	CPUUsageNanos, CPUUserNanos, CPUSystemNanos uint64
	CFSPeriods, CFSThrottledPeriods             uint64
	CFSThrottledNanos                           uint64

	MemoryUsage, MemoryMaxUsage, MemoryWorkingSet uint64
	MemoryRSS, MemoryCache, MemoryMappedFile      uint64
	MemorySwap, MemoryActiveFile                  uint64
	MemoryInactiveFile, MemoryFailcnt             uint64
	// PgFault and PgMajFault are this cgroup's own page faults; the Hierarchy ones include its descendants'
	// (cgroup v2 has only the latter: both are set from it).
	PgFault, PgMajFault, HierarchyPgFault, HierarchyPgMajFault uint64
	// OOMEvents counts the OOM kills in the cgroup (cgroup v2's memory.events oom_kill; v1: memory.oom_control).
	OOMEvents uint64
	// Kernel memory, dirty and writeback file pages; page reclaim (v2 only), refaults of evicted pages, and
	// the memory.high and memory.max events (v2 only).
	MemoryKernel, MemoryDirty, MemoryWriteback uint64
	PgScan, PgSteal, RefaultAnon, RefaultFile  uint64
	EventsHigh, EventsMax                      uint64

	// The cgroup's spec: CPU shares (v2: cpu.weight converted back), CFS period and quota in microseconds
	// (quota 0: none), memory limit, soft limit (v2: memory.low) and swap limit in bytes (0: unlimited).
	CPUShares, CPUPeriod, CPUQuota                  uint64
	MemoryLimit, MemoryReservation, MemorySwapLimit uint64

	// Processes and Threads are the cgroup's own (not its descendants'); ThreadsMax is pids.max (0: none).
	Processes, Threads, ThreadsMax uint64
}

// cgroupV2 reports whether the host's cgroups are the unified hierarchy.
func (r Reader) cgroupV2() bool {
	_, err := os.Stat(r.path("/sys/fs/cgroup/cgroup.controllers"))
	return err == nil
}

// Cgroups lists root and every cgroup below it, root first then in path order; none when root does not
// exist. Paths are below the hierarchy's root ("/kubepods/burstable/pod…"); on cgroup v1 the memory
// hierarchy is walked, which the kubelet's cgroups all have.
func (r Reader) Cgroups(root string) ([]string, error) {
	base := r.path("/sys/fs/cgroup/memory")
	if r.cgroupV2() {
		base = r.path("/sys/fs/cgroup")
	}
	start := filepath.Join(base, root)
	var out []string
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walked
			}
			return err
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(base, p)
			out = append(out, "/"+strings.TrimPrefix(filepath.ToSlash(rel), "."))
		}
		return nil
	})
	for i := range out {
		if out[i] != "/" {
			out[i] = strings.TrimSuffix(out[i], "/")
		}
	}
	sort.Strings(out)
	return out, err
}

// CgroupStats reads the figures of the cgroup at path (as Cgroups lists it). A cgroup gone meanwhile is an
// error wrapping fs.ErrNotExist.
func (r Reader) CgroupStats(path string) (CgroupStats, error) {
	s := CgroupStats{Path: path}
	if r.cgroupV2() {
		return s, r.cgroupStatsV2(&s)
	}
	return s, r.cgroupStatsV1(&s)
}

func (r Reader) cgroupStatsV1(s *CgroupStats) error {
	dir := func(controller, file string) string {
		return filepath.Join("/sys/fs/cgroup", controller, s.Path, file)
	}
	mem, err := readKeyed(r.path(dir("memory", "memory.stat")))
	if err != nil {
		return err
	}
	s.Created = r.changeTime(dir("memory", ""))
	usage := r.uintOr(dir("memory", "memory.usage_in_bytes"))
	s.MemoryUsage = usage
	s.MemoryMaxUsage = r.uintOr(dir("memory", "memory.max_usage_in_bytes"))
	s.MemoryFailcnt = r.uintOr(dir("memory", "memory.failcnt"))
	s.MemoryRSS = u(mem["total_rss"])
	s.MemoryCache = u(mem["total_cache"])
	s.MemoryMappedFile = u(mem["total_mapped_file"])
	s.MemorySwap = u(mem["total_swap"])
	s.MemoryActiveFile = u(mem["total_active_file"])
	s.MemoryInactiveFile = u(mem["total_inactive_file"])
	s.MemoryWorkingSet = sub(usage, s.MemoryInactiveFile)
	s.PgFault, s.PgMajFault = u(mem["pgfault"]), u(mem["pgmajfault"])
	s.HierarchyPgFault, s.HierarchyPgMajFault = u(mem["total_pgfault"]), u(mem["total_pgmajfault"])
	s.MemoryKernel = r.uintOr(dir("memory", "memory.kmem.usage_in_bytes"))
	s.MemoryDirty, s.MemoryWriteback = u(mem["total_dirty"]), u(mem["total_writeback"])
	s.RefaultAnon, s.RefaultFile = u(mem["total_workingset_refault_anon"]), u(mem["total_workingset_refault_file"])
	if oom, err := readKeyed(r.path(dir("memory", "memory.oom_control"))); err == nil {
		s.OOMEvents = u(oom["oom_kill"])
	}
	s.MemoryLimit = limit(r.uintOr(dir("memory", "memory.limit_in_bytes")))
	s.MemoryReservation = limit(r.uintOr(dir("memory", "memory.soft_limit_in_bytes")))
	s.MemorySwapLimit = limit(r.uintOr(dir("memory", "memory.memsw.limit_in_bytes")))

	s.CPUUsageNanos = r.uintOr(dir("cpuacct", "cpuacct.usage"))
	if st, err := readKeyed(r.path(dir("cpuacct", "cpuacct.stat"))); err == nil {
		// USER_HZ ticks, 100 a second on Linux.
		s.CPUUserNanos = u(st["user"]) * uint64(10*time.Millisecond)
		s.CPUSystemNanos = u(st["system"]) * uint64(10*time.Millisecond)
	}
	if st, err := readKeyed(r.path(dir("cpu", "cpu.stat"))); err == nil {
		s.CFSPeriods, s.CFSThrottledPeriods, s.CFSThrottledNanos = u(st["nr_periods"]), u(st["nr_throttled"]), u(st["throttled_time"])
	}
	s.CPUShares = r.uintOr(dir("cpu", "cpu.shares"))
	s.CPUPeriod = r.uintOr(dir("cpu", "cpu.cfs_period_us"))
	if q, err := r.readInt(dir("cpu", "cpu.cfs_quota_us")); err == nil && q > 0 {
		s.CPUQuota = uint64(q)
	}
	s.Processes = r.lines(dir("pids", "cgroup.procs"))
	s.Threads = r.lines(dir("pids", "tasks"))
	s.ThreadsMax = r.uintOr(dir("pids", "pids.max"))
	return nil
}

func (r Reader) cgroupStatsV2(s *CgroupStats) error {
	dir := func(file string) string { return filepath.Join("/sys/fs/cgroup", s.Path, file) }
	root := strings.Trim(s.Path, "/") == ""
	cpu, err := readKeyed(r.path(dir("cpu.stat")))
	if err != nil {
		return err
	}
	s.Created = r.changeTime(dir(""))
	us := uint64(time.Microsecond)
	s.CPUUsageNanos, s.CPUUserNanos, s.CPUSystemNanos = u(cpu["usage_usec"])*us, u(cpu["user_usec"])*us, u(cpu["system_usec"])*us
	s.CFSPeriods, s.CFSThrottledPeriods, s.CFSThrottledNanos = u(cpu["nr_periods"]), u(cpu["nr_throttled"]), u(cpu["throttled_usec"])*us
	if mem, err := readKeyed(r.path(dir("memory.stat"))); err == nil {
		usage := r.uintOr(dir("memory.current"))
		if root {
			if mi, err := r.meminfo(); err == nil {
				usage = u(mi["MemTotal"] - mi["MemFree"])
			}
		}
		s.MemoryUsage = usage
		s.MemoryMaxUsage = r.uintOr(dir("memory.peak"))
		s.MemoryRSS, s.MemoryCache, s.MemoryMappedFile = u(mem["anon"]), u(mem["file"]), u(mem["file_mapped"])
		s.MemoryActiveFile, s.MemoryInactiveFile = u(mem["active_file"]), u(mem["inactive_file"])
		s.MemoryWorkingSet = sub(usage, s.MemoryInactiveFile)
		s.PgFault, s.PgMajFault = u(mem["pgfault"]), u(mem["pgmajfault"])
		s.HierarchyPgFault, s.HierarchyPgMajFault = s.PgFault, s.PgMajFault
		s.MemorySwap = r.uintOr(dir("memory.swap.current"))
		s.MemoryKernel, s.MemoryDirty, s.MemoryWriteback = u(mem["kernel"]), u(mem["file_dirty"]), u(mem["file_writeback"])
		s.PgScan, s.PgSteal = u(mem["pgscan"]), u(mem["pgsteal"])
		s.RefaultAnon, s.RefaultFile = u(mem["workingset_refault_anon"]), u(mem["workingset_refault_file"])
		if ev, err := readKeyed(r.path(dir("memory.events"))); err == nil {
			s.OOMEvents = u(ev["oom_kill"])
			s.MemoryFailcnt, s.EventsMax, s.EventsHigh = u(ev["max"]), u(ev["max"]), u(ev["high"])
		}
	}
	s.MemoryLimit = r.uintOr(dir("memory.max")) // "max" does not parse: 0
	s.MemoryReservation = r.uintOr(dir("memory.low"))
	s.MemorySwapLimit = r.uintOr(dir("memory.swap.max"))
	if w, err := r.readInt(dir("cpu.weight")); err == nil && w > 0 {
		s.CPUShares = weightToShares(uint64(w))
	}
	if quota, period, ok := r.cpuMax(dir("cpu.max")); ok {
		s.CPUQuota, s.CPUPeriod = quota, period
	}
	s.Processes = r.lines(dir("cgroup.procs"))
	s.Threads = r.lines(dir("cgroup.threads"))
	s.ThreadsMax = r.uintOr(dir("pids.max"))
	return nil
}

// cpuMax reads cgroup v2's "quota period" (quota "max": none, 0).
func (r Reader) cpuMax(p string) (quota, period uint64, ok bool) {
	v, err := r.readTrimmed(p)
	if err != nil {
		return 0, 0, false
	}
	q, per, found := strings.Cut(v, " ")
	if !found {
		return 0, 0, false
	}
	period, err = strconv.ParseUint(per, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	quota, _ = strconv.ParseUint(q, 10, 64)
	return quota, period, true
}

// weightToShares turns a cgroup v2 cpu.weight back into the cgroup v1 shares it was made from (runc's
// shares → weight conversion, inverted, as cAdvisor reports it).
func weightToShares(weight uint64) uint64 {
	return 2 + ((weight-1)*262142)/9999
}

// uintOr reads an unsigned figure, 0 when missing or not a number ("max").
func (r Reader) uintOr(p string) uint64 {
	v, err := r.readTrimmed(p)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// lines counts the lines of a file (the PIDs of cgroup.procs and tasks).
func (r Reader) lines(p string) uint64 {
	b, err := os.ReadFile(r.path(p))
	if err != nil {
		return 0
	}
	return uint64(strings.Count(string(b), "\n"))
}

// changeTime is a directory's change time (zero when it cannot be read).
func (r Reader) changeTime(p string) time.Time {
	fi, err := os.Stat(r.path(p))
	if err != nil {
		return time.Time{}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	}
	return fi.ModTime()
}

// limit is a cgroup v1 limit, 0 when it means none (at or above PAGE_COUNTER_MAX pages).
func limit(v uint64) uint64 {
	if v >= uint64(unlimited) || v > math.MaxInt64 {
		return 0
	}
	return v
}

func u(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}

func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// CPUTopology counts the machine's physical cores and sockets from the kernel's CPU topology (each distinct
// core of a package, each distinct package); 0 where the kernel gives no topology.
func (r Reader) CPUTopology() (physicalCores, sockets int) {
	dirs, err := filepath.Glob(r.path("/sys/devices/system/cpu/cpu[0-9]*/topology"))
	if err != nil {
		return 0, 0
	}
	cores, packages := map[string]bool{}, map[string]bool{}
	for _, d := range dirs {
		pkg, err1 := os.ReadFile(filepath.Join(d, "physical_package_id"))
		core, err2 := os.ReadFile(filepath.Join(d, "core_id"))
		if err1 != nil || err2 != nil {
			continue
		}
		p := strings.TrimSpace(string(pkg))
		packages[p] = true
		cores[p+"/"+strings.TrimSpace(string(core))] = true
	}
	return len(cores), len(packages)
}
