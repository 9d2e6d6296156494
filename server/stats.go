package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/machine"
)

// NodeStats are the node's own figures in /stats/summary and /metrics/resource.
type NodeStats struct {
	// StartTime is when the node started (its boot time).
	StartTime time.Time
	// CPU: UsageCoreNanoSeconds is cumulative since boot; a nil UsageNanoCores is derived by the server from
	// successive readings.
	CPU statsapi.CPUStats
	// Memory: WorkingSetBytes is what metrics-server reads (e.g. MemTotal - MemAvailable).
	Memory statsapi.MemoryStats
	// Fs is nodefs, the filesystem of nodelet's root dir.
	Fs statsapi.FsStats
	// SystemContainers are the node's system containers' figures (the "pods" container: the kubepods
	// cgroup, whose memory the allocatableMemory.available eviction signal reads).
	SystemContainers []statsapi.ContainerStats
	// Network, Rlimit and Swap are reported when set.
	Network *statsapi.NetworkStats
	Rlimit  *statsapi.RlimitStats
	Swap    *statsapi.SwapStats
}

// statsSummary serves /stats/summary; only_cpu_and_memory=true leaves out filesystems and networks.
func (s statsHandlers) statsSummary(w http.ResponseWriter, r *http.Request) {
	sum, err := s.summary(r.Context(), r.URL.Query().Get("only_cpu_and_memory") == "true")
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(r.Context(), w, sum)
}

// PodSummaries is the summary's pods part (the running pods' figures), as /stats/summary serves it.
func (s *Server) PodSummaries(ctx context.Context) ([]statsapi.PodStats, error) {
	return s.statsh().podSummaries(ctx, false)
}

// NodeSummary is the summary's node part alone (no pods), as the eviction manager reads it on every pass.
func (s *Server) NodeSummary(ctx context.Context) (*statsapi.Summary, error) {
	node, err := s.statsh().nodeSummary(ctx, false)
	if err != nil {
		return nil, err
	}
	return &statsapi.Summary{Node: node}, nil
}

// summary gathers the node's and the running pods' figures.
func (s statsHandlers) summary(ctx context.Context, cpuAndMemoryOnly bool) (*statsapi.Summary, error) {
	node, err := s.nodeSummary(ctx, cpuAndMemoryOnly)
	if err != nil {
		return nil, err
	}
	pods, err := s.podSummaries(ctx, cpuAndMemoryOnly)
	if err != nil {
		return nil, err
	}
	return &statsapi.Summary{Node: node, Pods: pods}, nil
}

func (s statsHandlers) nodeSummary(ctx context.Context, cpuAndMemoryOnly bool) (statsapi.NodeStats, error) {
	out := statsapi.NodeStats{NodeName: s.opts.NodeName}
	if s.opts.NodeStats == nil {
		return out, nil
	}
	n, err := s.opts.NodeStats(ctx)
	if err != nil {
		return out, fmt.Errorf("node stats: %w", err)
	}
	cpu, mem := n.CPU, n.Memory
	s.cpu.fill("node", &cpu)
	out.StartTime, out.CPU, out.Memory, out.Swap = metav1.NewTime(n.StartTime), &cpu, &mem, n.Swap
	out.SystemContainers = n.SystemContainers
	if cpuAndMemoryOnly {
		return out, nil
	}
	fs := n.Fs
	out.Fs, out.Network, out.Rlimit = &fs, n.Network, n.Rlimit
	out.Runtime = s.runtimeFs(ctx)
	return out, nil
}

// runtimeFs is the image filesystem (and the containers' one, where the runtime splits them).
func (s statsHandlers) runtimeFs(ctx context.Context) *statsapi.RuntimeStats {
	resp, err := s.opts.Runtime.ImageFsInfo(ctx)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("Failed to get the image filesystem", "err", err.Error())
		return nil
	}
	rs := &statsapi.RuntimeStats{}
	if fss := resp.GetImageFilesystems(); len(fss) > 0 {
		rs.ImageFs = withCapacity(fsStats(fss[0]), fss[0])
		rs.ContainerFs = rs.ImageFs
	}
	if fss := resp.GetContainerFilesystems(); len(fss) > 0 {
		rs.ContainerFs = withCapacity(fsStats(fss[0]), fss[0])
	}
	return rs
}

// withCapacity adds the size and free space of the filesystem at the runtime filesystem's mountpoint, as
// the kubelet's CRI stats provider does (the runtime reports only what it uses); left out when the
// mountpoint is not this host's.
func withCapacity(st *statsapi.FsStats, u *runtimeapi.FilesystemUsage) *statsapi.FsStats {
	mp := u.GetFsId().GetMountpoint()
	if st == nil || mp == "" {
		return st
	}
	fu, err := machine.Statfs(mp)
	if err != nil {
		return st
	}
	capacity, avail, inodes, free := uint64(fu.CapacityBytes), uint64(fu.AvailableBytes), uint64(fu.Inodes), uint64(fu.InodesFree)
	st.CapacityBytes, st.AvailableBytes, st.Inodes, st.InodesFree = &capacity, &avail, &inodes, &free
	return st
}

func fsStats(u *runtimeapi.FilesystemUsage) *statsapi.FsStats {
	if u == nil {
		return nil
	}
	return &statsapi.FsStats{
		Time:       metav1.NewTime(time.Unix(0, u.GetTimestamp())),
		UsedBytes:  uint64Ptr(u.GetUsedBytes()),
		InodesUsed: uint64Ptr(u.GetInodesUsed()),
	}
}

func uint64Ptr(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	x := v.GetValue()
	return &x
}

func cpuStats(u *runtimeapi.CpuUsage) *statsapi.CPUStats {
	if u == nil {
		return nil
	}
	return &statsapi.CPUStats{
		Time:                 metav1.NewTime(time.Unix(0, u.GetTimestamp())),
		UsageNanoCores:       uint64Ptr(u.GetUsageNanoCores()),
		UsageCoreNanoSeconds: uint64Ptr(u.GetUsageCoreNanoSeconds()),
	}
}

func memoryStats(u *runtimeapi.MemoryUsage) *statsapi.MemoryStats {
	if u == nil {
		return nil
	}
	return &statsapi.MemoryStats{
		Time:            metav1.NewTime(time.Unix(0, u.GetTimestamp())),
		AvailableBytes:  uint64Ptr(u.GetAvailableBytes()),
		UsageBytes:      uint64Ptr(u.GetUsageBytes()),
		WorkingSetBytes: uint64Ptr(u.GetWorkingSetBytes()),
		RSSBytes:        uint64Ptr(u.GetRssBytes()),
		PageFaults:      uint64Ptr(u.GetPageFaults()),
		MajorPageFaults: uint64Ptr(u.GetMajorPageFaults()),
	}
}

// cpuRates derives usageNanoCores from two readings of usageCoreNanoSeconds, when the runtime or the
// machine reader does not give it.
type cpuRates struct {
	mu   sync.Mutex
	last map[string]cpuSample
}

type cpuSample struct {
	at    time.Time
	usage uint64
}

// staleSample: readings older than this are forgotten (their container is gone).
const staleSample = 10 * time.Minute

func newCPURates() *cpuRates { return &cpuRates{last: map[string]cpuSample{}} }

// fill sets c.UsageNanoCores from the previous reading of key, if c has none, and remembers c.
func (r *cpuRates) fill(key string, c *statsapi.CPUStats) {
	if c == nil || c.UsageCoreNanoSeconds == nil {
		return
	}
	now := cpuSample{at: c.Time.Time, usage: *c.UsageCoreNanoSeconds}
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, ok := r.last[key]
	if c.UsageNanoCores == nil && ok && now.at.After(prev.at) && now.usage >= prev.usage {
		rate := uint64(float64(now.usage-prev.usage) / now.at.Sub(prev.at).Seconds())
		c.UsageNanoCores = &rate
	}
	if !ok || now.at.After(prev.at) {
		r.last[key] = now
	}
}

// prune forgets readings much older than the newest one.
func (r *cpuRates) prune() {
	r.mu.Lock()
	defer r.mu.Unlock()
	var newest time.Time
	for _, v := range r.last {
		if v.at.After(newest) {
			newest = v.at
		}
	}
	for k, v := range r.last {
		if newest.Sub(v.at) > staleSample {
			delete(r.last, k)
		}
	}
}
