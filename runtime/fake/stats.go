package fake

import (
	"context"
	"maps"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Plausible per-container usage figures reported by the stats methods.
const (
	statCPUNanoCores     = 1_000_000  // 1m CPU
	statCPUCoreNanos     = 10_000_000 // 10ms CPU time
	statMemWorkingSet    = 4 << 20
	statMemRSS           = 2 << 20
	statWritableBytes    = 4096
	statWritableInodes   = 10
	statNetRxBytes       = 1024
	statNetTxBytes       = 512
	containerMountpoint  = imageMountpoint
	defaultInterfaceName = "eth0"
)

func u64(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }

// containerStats returns usage for c; a container that is not running uses
// nothing but its writable layer.
func (r *statsService) containerStats(c *container) *runtimeapi.ContainerStats {
	now := r.now()
	var cpu, coreNanos, mem, rss uint64
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		cpu, coreNanos, mem, rss = statCPUNanoCores, statCPUCoreNanos, statMemWorkingSet, statMemRSS
		if b := c.behaviour; b.CPUNanoCores > 0 {
			cpu = b.CPUNanoCores
			// CPU time at that rate since the container started.
			if up := now - c.startedAt; up > 0 {
				coreNanos = uint64(float64(b.CPUNanoCores) * float64(up) / 1e9)
			}
		}
		if b := c.behaviour; b.MemoryBytes > 0 {
			mem, rss = b.MemoryBytes, b.MemoryBytes/2
		}
	}
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{
			Id:          c.id,
			Metadata:    proto.CloneOf(c.config.GetMetadata()),
			Labels:      maps.Clone(c.config.GetLabels()),
			Annotations: maps.Clone(c.config.GetAnnotations()),
		},
		Cpu: &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: u64(coreNanos), UsageNanoCores: u64(cpu)},
		Memory: &runtimeapi.MemoryUsage{
			Timestamp:       now,
			WorkingSetBytes: u64(mem),
			UsageBytes:      u64(mem),
			RssBytes:        u64(rss),
			PageFaults:      u64(0),
			MajorPageFaults: u64(0),
		},
		WritableLayer: &runtimeapi.FilesystemUsage{
			Timestamp:  now,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: containerMountpoint},
			UsedBytes:  u64(statWritableBytes),
			InodesUsed: u64(statWritableInodes),
		},
	}
}

func (r *statsService) sandboxStatsLocked(s *sandbox) *runtimeapi.PodSandboxStats {
	now := r.now()
	var cs []*runtimeapi.ContainerStats
	var cpu, coreNanos, mem, rss, procs uint64
	for _, c := range r.containersOfLocked(s.id) {
		if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		st := r.containerStats(c)
		cs = append(cs, st)
		cpu += st.GetCpu().GetUsageNanoCores().GetValue()
		coreNanos += st.GetCpu().GetUsageCoreNanoSeconds().GetValue()
		mem += st.GetMemory().GetWorkingSetBytes().GetValue()
		rss += st.GetMemory().GetRssBytes().GetValue()
		procs++
	}
	iface := &runtimeapi.NetworkInterfaceUsage{
		Name: defaultInterfaceName, RxBytes: u64(statNetRxBytes), RxErrors: u64(0),
		TxBytes: u64(statNetTxBytes), TxErrors: u64(0),
	}
	return &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{
			Id:          s.id,
			Metadata:    proto.CloneOf(s.config.GetMetadata()),
			Labels:      maps.Clone(s.config.GetLabels()),
			Annotations: maps.Clone(s.config.GetAnnotations()),
		},
		Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu:        &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: u64(coreNanos), UsageNanoCores: u64(cpu)},
			Memory:     &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: u64(mem), UsageBytes: u64(mem), RssBytes: u64(rss)},
			Network:    &runtimeapi.NetworkUsage{Timestamp: now, DefaultInterface: iface, Interfaces: []*runtimeapi.NetworkInterfaceUsage{proto.CloneOf(iface)}},
			Process:    &runtimeapi.ProcessUsage{Timestamp: now, ProcessCount: u64(procs)},
			Containers: cs,
		},
	}
}

// ContainerStats returns usage of one container, NotFound if missing.
func (r *statsService) ContainerStats(_ context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	if err := r.begin("ContainerStats"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.containerLocked(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatsResponse{Stats: r.containerStats(c)}, nil
}

func (r *statsService) listContainerStatsLocked(f *runtimeapi.ContainerStatsFilter) []*runtimeapi.ContainerStats {
	out := []*runtimeapi.ContainerStats{}
	cf := &runtimeapi.ContainerFilter{
		Id:            f.GetId(),
		PodSandboxId:  f.GetPodSandboxId(),
		LabelSelector: f.GetLabelSelector(),
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}
	for _, c := range r.sortedContainersLocked() {
		if c.matches(cf) {
			out = append(out, r.containerStats(c))
		}
	}
	return out
}

// ListContainerStats returns usage of the running containers matching the
// filter.
func (r *statsService) ListContainerStats(_ context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	if err := r.begin("ListContainerStats"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return &runtimeapi.ListContainerStatsResponse{Stats: r.listContainerStatsLocked(req.GetFilter())}, nil
}

// StreamContainerStats sends the ListContainerStats result as one message.
func (r *statsService) StreamContainerStats(req *runtimeapi.StreamContainerStatsRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamContainerStatsResponse]) error {
	if err := r.begin("StreamContainerStats"); err != nil {
		return err
	}
	r.mu.Lock()
	items := r.listContainerStatsLocked(req.GetFilter())
	r.mu.Unlock()
	return stream.Send(&runtimeapi.StreamContainerStatsResponse{ContainerStats: items})
}

// PodSandboxStats returns usage of one sandbox, NotFound if missing.
func (r *statsService) PodSandboxStats(_ context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	if err := r.begin("PodSandboxStats"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.sandboxLocked(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: r.sandboxStatsLocked(s)}, nil
}

func (r *statsService) listSandboxStatsLocked(f *runtimeapi.PodSandboxStatsFilter) []*runtimeapi.PodSandboxStats {
	out := []*runtimeapi.PodSandboxStats{}
	sf := &runtimeapi.PodSandboxFilter{
		Id:            f.GetId(),
		LabelSelector: f.GetLabelSelector(),
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	}
	for _, s := range r.sortedSandboxesLocked() {
		if s.matches(sf) {
			out = append(out, r.sandboxStatsLocked(s))
		}
	}
	return out
}

// ListPodSandboxStats returns usage of the READY sandboxes matching the
// filter.
func (r *statsService) ListPodSandboxStats(_ context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	if err := r.begin("ListPodSandboxStats"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: r.listSandboxStatsLocked(req.GetFilter())}, nil
}

// StreamPodSandboxStats sends the ListPodSandboxStats result as one message.
func (r *statsService) StreamPodSandboxStats(req *runtimeapi.StreamPodSandboxStatsRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxStatsResponse]) error {
	if err := r.begin("StreamPodSandboxStats"); err != nil {
		return err
	}
	r.mu.Lock()
	items := r.listSandboxStatsLocked(req.GetFilter())
	r.mu.Unlock()
	return stream.Send(&runtimeapi.StreamPodSandboxStatsResponse{PodSandboxStats: items})
}

// ListMetricDescriptors returns no descriptors.
func (r *statsService) ListMetricDescriptors(context.Context, *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	if err := r.begin("ListMetricDescriptors"); err != nil {
		return nil, err
	}
	return &runtimeapi.ListMetricDescriptorsResponse{}, nil
}

// ListPodSandboxMetrics returns no metrics.
func (r *statsService) ListPodSandboxMetrics(context.Context, *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	if err := r.begin("ListPodSandboxMetrics"); err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxMetricsResponse{}, nil
}

// StreamPodSandboxMetrics sends one empty message.
func (r *statsService) StreamPodSandboxMetrics(_ *runtimeapi.StreamPodSandboxMetricsRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxMetricsResponse]) error {
	if err := r.begin("StreamPodSandboxMetrics"); err != nil {
		return err
	}
	return stream.Send(&runtimeapi.StreamPodSandboxMetricsResponse{})
}
