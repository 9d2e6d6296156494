package eviction

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/config"
)

// observation is one signal's available amount and capacity, and when it was measured.
type observation struct {
	available, capacity int64
	time                time.Time
}

// observations are the signals measured in one pass.
type observations map[string]observation

// podStats finds a pod's figures in the summary the observations came from.
type podStats func(uid types.UID) (statsapi.PodStats, bool)

// observe derives the signals from a stats summary as the kubelet's makeSignalObservations does: node
// memory (available; capacity = available + working set), the pods' allocatable memory (the "pods" system
// container), nodefs, the runtime's image and container filesystems, and the node's PID limit.
func observe(sum *statsapi.Summary) (observations, podStats) {
	byUID := make(map[types.UID]statsapi.PodStats, len(sum.Pods))
	for _, p := range sum.Pods {
		byUID[types.UID(p.PodRef.UID)] = p
	}
	stats := func(uid types.UID) (statsapi.PodStats, bool) {
		p, ok := byUID[uid]
		return p, ok
	}
	out := observations{}
	n := sum.Node
	if m := n.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		out[config.SignalMemoryAvailable] = observation{int64(*m.AvailableBytes), int64(*m.AvailableBytes + *m.WorkingSetBytes), m.Time.Time}
	}
	for _, c := range n.SystemContainers {
		if m := c.Memory; c.Name == statsapi.SystemContainerPods && m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
			out[config.SignalAllocatableMemoryAvailable] = observation{int64(*m.AvailableBytes), int64(*m.AvailableBytes + *m.WorkingSetBytes), m.Time.Time}
		}
	}
	fsObservations(out, n.Fs, config.SignalNodeFsAvailable, config.SignalNodeFsInodesFree)
	if rt := n.Runtime; rt != nil {
		fsObservations(out, rt.ImageFs, config.SignalImageFsAvailable, config.SignalImageFsInodesFree)
		fsObservations(out, rt.ContainerFs, config.SignalContainerFsAvailable, config.SignalContainerFsInodesFree)
	}
	if r := n.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		out[config.SignalPIDAvailable] = observation{*r.MaxPID - *r.NumOfRunningProcesses, *r.MaxPID, r.Time.Time}
	}
	return out, stats
}

func fsObservations(out observations, fs *statsapi.FsStats, bytesSignal, inodesSignal string) {
	if fs == nil {
		return
	}
	if fs.AvailableBytes != nil && fs.CapacityBytes != nil {
		out[bytesSignal] = observation{int64(*fs.AvailableBytes), int64(*fs.CapacityBytes), fs.Time.Time}
	}
	if fs.InodesFree != nil && fs.Inodes != nil {
		out[inodesSignal] = observation{int64(*fs.InodesFree), int64(*fs.Inodes), fs.Time.Time}
	}
}
