package server

import (
	corev1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/podrules"
)

// sumCPU adds the containers' cumulative CPU; nil when none reports it. The time is the newest reading.
func sumCPU(cs []statsapi.ContainerStats) *statsapi.CPUStats {
	var out *statsapi.CPUStats
	for _, c := range cs {
		if c.CPU == nil || c.CPU.UsageCoreNanoSeconds == nil {
			continue
		}
		if out == nil {
			out = &statsapi.CPUStats{Time: c.CPU.Time, UsageCoreNanoSeconds: new(uint64)}
		}
		*out.UsageCoreNanoSeconds += *c.CPU.UsageCoreNanoSeconds
		if c.CPU.Time.After(out.Time.Time) {
			out.Time = c.CPU.Time
		}
	}
	return out
}

// sumMemory adds the containers' working set, usage and RSS.
func sumMemory(cs []statsapi.ContainerStats) *statsapi.MemoryStats {
	var out *statsapi.MemoryStats
	for _, c := range cs {
		if c.Memory == nil || c.Memory.WorkingSetBytes == nil {
			continue
		}
		if out == nil {
			out = &statsapi.MemoryStats{Time: c.Memory.Time, WorkingSetBytes: new(uint64)}
		}
		*out.WorkingSetBytes += *c.Memory.WorkingSetBytes
		out.UsageBytes = addTo(out.UsageBytes, c.Memory.UsageBytes)
		out.RSSBytes = addTo(out.RSSBytes, c.Memory.RSSBytes)
		if c.Memory.Time.After(out.Time.Time) {
			out.Time = c.Memory.Time
		}
	}
	return out
}

// ephemeralStorage is a pod's local ephemeral storage as the kubelet's summary counts it: its containers'
// writable layers and logs, and its local ephemeral volumes (podrules.IsLocalEphemeralVolume; none when
// the pod's spec is unknown).
func ephemeralStorage(cs []statsapi.ContainerStats, vols []statsapi.VolumeStats, pod *corev1.Pod) *statsapi.FsStats {
	out := sumFs(cs)
	if pod == nil {
		return out
	}
	local := map[string]bool{}
	for i := range pod.Spec.Volumes {
		if podrules.IsLocalEphemeralVolume(&pod.Spec.Volumes[i]) {
			local[pod.Spec.Volumes[i].Name] = true
		}
	}
	for i := range vols {
		if !local[vols[i].Name] {
			continue
		}
		fs := &vols[i].FsStats
		if out == nil {
			out = &statsapi.FsStats{Time: fs.Time}
		}
		out.UsedBytes = addTo(out.UsedBytes, fs.UsedBytes)
		out.InodesUsed = addTo(out.InodesUsed, fs.InodesUsed)
		if fs.Time.After(out.Time.Time) {
			out.Time = fs.Time
		}
	}
	return out
}

// sumFs is what a pod's containers' writable layers and logs use.
func sumFs(cs []statsapi.ContainerStats) *statsapi.FsStats {
	var out *statsapi.FsStats
	for _, c := range cs {
		for _, fs := range []*statsapi.FsStats{c.Rootfs, c.Logs} {
			if fs == nil {
				continue
			}
			if out == nil {
				out = &statsapi.FsStats{Time: fs.Time}
			}
			out.UsedBytes = addTo(out.UsedBytes, fs.UsedBytes)
			out.InodesUsed = addTo(out.InodesUsed, fs.InodesUsed)
		}
	}
	return out
}

func addTo(sum, v *uint64) *uint64 {
	if v == nil {
		return sum
	}
	if sum == nil {
		sum = new(uint64)
	}
	*sum += *v
	return sum
}
