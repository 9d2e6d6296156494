package server

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/runtime/podconfig"
)

// runtimeView is what the runtime says about running pods, read once per summary.
type runtimeView struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers map[string]*runtimeapi.Container            // running, by ID
	stats      map[string][]*runtimeapi.ContainerStats     // of running containers, by sandbox ID
	podStats   map[string]*runtimeapi.LinuxPodSandboxStats // by sandbox ID; empty if the runtime has none
}

// podSummaries are the figures of the pods with a ready sandbox, from CRI stats: the pod's own cgroup
// figures where the runtime gives sandbox stats, else the sum of its containers'.
func (s statsHandlers) podSummaries(ctx context.Context, cpuAndMemoryOnly bool) ([]statsapi.PodStats, error) {
	v, err := s.readRuntime(ctx)
	if err != nil {
		return nil, err
	}
	defer s.cpu.prune()
	var specs map[types.UID]*corev1.Pod
	if !cpuAndMemoryOnly {
		specs = s.podSpecs(ctx)
	}
	pods := make([]statsapi.PodStats, 0, len(v.sandboxes))
	for _, sb := range v.sandboxes {
		pods = append(pods, s.podStats(sb, v, cpuAndMemoryOnly, specs[types.UID(sb.GetMetadata().GetUid())]))
	}
	return pods, nil
}

// podSpecs are the node's pods by UID, for the volumes their ephemeral storage counts (none when they
// cannot be listed: the ephemeral storage is then the containers' alone).
func (s statsHandlers) podSpecs(ctx context.Context) map[types.UID]*corev1.Pod {
	if s.opts.Pods == nil {
		return nil
	}
	list, err := s.opts.Pods.List(ctx)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(4).Info("No pod specs for the summary's ephemeral storage", "err", err.Error())
		return nil
	}
	out := make(map[types.UID]*corev1.Pod, len(list))
	for i := range list {
		out[list[i].UID] = &list[i]
	}
	return out
}

func (s statsHandlers) readRuntime(ctx context.Context) (*runtimeView, error) {
	rt := s.opts.Runtime
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	st, err := rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		return nil, fmt.Errorf("list container stats: %w", err)
	}
	v := &runtimeView{sandboxes: sbs, containers: map[string]*runtimeapi.Container{},
		stats: map[string][]*runtimeapi.ContainerStats{}, podStats: s.sandboxStats(ctx)}
	for _, c := range cs {
		v.containers[c.GetId()] = c
	}
	for _, cst := range st {
		if c, ok := v.containers[cst.GetAttributes().GetId()]; ok {
			v.stats[c.GetPodSandboxId()] = append(v.stats[c.GetPodSandboxId()], cst)
		}
	}
	return v, nil
}

// sandboxStats are the pods' cgroup figures, where the runtime implements ListPodSandboxStats.
func (s statsHandlers) sandboxStats(ctx context.Context) map[string]*runtimeapi.LinuxPodSandboxStats {
	out := map[string]*runtimeapi.LinuxPodSandboxStats{}
	st, err := s.opts.Runtime.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{})
	if err != nil {
		ctrl.LoggerFrom(ctx).V(4).Info("No pod sandbox stats: summing containers", "err", err.Error())
		return out
	}
	for _, p := range st {
		if p.GetLinux() != nil {
			out[p.GetAttributes().GetId()] = p.GetLinux()
		}
	}
	return out
}

// podStats are one pod's figures; spec, when known, says which of its volumes are local ephemeral storage.
func (s statsHandlers) podStats(sb *runtimeapi.PodSandbox, v *runtimeView, cpuAndMemoryOnly bool, spec *corev1.Pod) statsapi.PodStats {
	md := sb.GetMetadata()
	ps := statsapi.PodStats{
		PodRef:     statsapi.PodReference{Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid()},
		StartTime:  metav1.NewTime(time.Unix(0, sb.GetCreatedAt())),
		Containers: []statsapi.ContainerStats{},
	}
	for _, cst := range v.stats[sb.GetId()] {
		ps.Containers = append(ps.Containers, s.containerStats(md, cst, v.containers[cst.GetAttributes().GetId()], cpuAndMemoryOnly))
	}
	ps.CPU, ps.Memory = sumCPU(ps.Containers), sumMemory(ps.Containers)
	if linux := v.podStats[sb.GetId()]; linux != nil {
		if c := cpuStats(linux.GetCpu()); c != nil && c.UsageCoreNanoSeconds != nil {
			ps.CPU = c
		}
		if m := memoryStats(linux.GetMemory()); m != nil && m.WorkingSetBytes != nil {
			ps.Memory = m
		}
		if !cpuAndMemoryOnly {
			ps.Network = networkStats(linux.GetNetwork())
		}
	}
	if s.opts.PodProcesses != nil {
		if n, ok := s.opts.PodProcesses(types.UID(md.GetUid())); ok {
			ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: &n}
		}
	}
	s.cpu.fill("pod/"+md.GetUid(), ps.CPU)
	if !cpuAndMemoryOnly {
		if s.opts.PodVolumeStats != nil {
			ps.VolumeStats = s.opts.PodVolumeStats(types.UID(md.GetUid()))
		}
		ps.EphemeralStorage = ephemeralStorage(ps.Containers, ps.VolumeStats, spec)
	}
	return ps
}

func (s statsHandlers) containerStats(pod *runtimeapi.PodSandboxMetadata, cst *runtimeapi.ContainerStats, c *runtimeapi.Container, cpuAndMemoryOnly bool) statsapi.ContainerStats {
	name := cst.GetAttributes().GetMetadata().GetName()
	out := statsapi.ContainerStats{
		Name:      name,
		StartTime: metav1.NewTime(time.Unix(0, c.GetCreatedAt())),
		CPU:       cpuStats(cst.GetCpu()),
		Memory:    memoryStats(cst.GetMemory()),
	}
	s.cpu.fill(cst.GetAttributes().GetId(), out.CPU)
	if cpuAndMemoryOnly {
		return out
	}
	out.Rootfs = fsStats(cst.GetWritableLayer())
	podRef := &corev1.Pod{}
	podRef.Namespace, podRef.Name, podRef.UID = pod.GetNamespace(), pod.GetName(), types.UID(pod.GetUid())
	if dir, err := podconfig.ContainerLogDir(s.opts.PodLogsDir, podRef, name); err == nil {
		out.Logs = dirUsage(dir)
	}
	return out
}

// dirUsage is what the files of a container's log directory use.
func dirUsage(dir string) *statsapi.FsStats {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var used, inodes uint64
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			used += uint64(info.Size())
			inodes++
		}
	}
	inodes++ // the directory itself
	return &statsapi.FsStats{Time: metav1.Now(), UsedBytes: &used, InodesUsed: &inodes}
}

func networkStats(n *runtimeapi.NetworkUsage) *statsapi.NetworkStats {
	if n == nil || n.GetDefaultInterface() == nil {
		return nil
	}
	iface := func(i *runtimeapi.NetworkInterfaceUsage) statsapi.InterfaceStats {
		return statsapi.InterfaceStats{Name: i.GetName(), RxBytes: uint64Ptr(i.GetRxBytes()),
			RxErrors: uint64Ptr(i.GetRxErrors()), TxBytes: uint64Ptr(i.GetTxBytes()), TxErrors: uint64Ptr(i.GetTxErrors())}
	}
	out := &statsapi.NetworkStats{Time: metav1.NewTime(time.Unix(0, n.GetTimestamp())),
		InterfaceStats: iface(n.GetDefaultInterface())}
	for _, i := range n.GetInterfaces() {
		out.Interfaces = append(out.Interfaces, iface(i))
	}
	return out
}
