package eviction

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/podrules"
)

// rankFunc orders pods for eviction, the first to go first.
type rankFunc func(pods []*corev1.Pod, stats podStats)

// compare orders two pods: negative puts a first.
type compare func(a, b *corev1.Pod) int

// orderedBy sorts by the first comparison that tells two pods apart.
func orderedBy(pods []*corev1.Pod, cmps ...compare) {
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		for _, c := range cmps {
			if r := c(a, b); r != 0 {
				return r
			}
		}
		return 0
	})
}

// trueFirst orders true before false.
func trueFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	default:
		return 1
	}
}

// byPriority puts the lower priority first.
func byPriority(a, b *corev1.Pod) int {
	return cmp.Compare(podrules.PodPriority(a), podrules.PodPriority(b))
}

// request is what the pod requests of a resource (the kubelet's pod resource rule).
func request(pod *corev1.Pod, name corev1.ResourceName) int64 {
	q := podrules.PodRequests(pod, podrules.ResourceOptions{})[name]
	return q.Value()
}

func memoryUsage(s statsapi.PodStats) int64 {
	if s.Memory == nil || s.Memory.WorkingSetBytes == nil {
		return 0
	}
	return int64(*s.Memory.WorkingSetBytes)
}

// usageCompare builds the two comparisons of a resource's ranking: pods whose usage exceeds their request
// first, and the larger usage above request first. A pod without stats goes before one with.
func usageCompare(stats podStats, usage func(*corev1.Pod, statsapi.PodStats) int64, name corev1.ResourceName) (exceeds, above compare) {
	read := func(p *corev1.Pod) (int64, bool) {
		s, ok := stats(p.UID)
		if !ok {
			return 0, false
		}
		return usage(p, s), true
	}
	exceeds = func(a, b *corev1.Pod) int {
		ua, oka := read(a)
		ub, okb := read(b)
		if !oka || !okb {
			return trueFirst(!oka, !okb)
		}
		return trueFirst(ua > request(a, name), ub > request(b, name))
	}
	above = func(a, b *corev1.Pod) int {
		ua, oka := read(a)
		ub, okb := read(b)
		if !oka || !okb {
			return trueFirst(!oka, !okb)
		}
		return cmp.Compare(ub-request(b, name), ua-request(a, name))
	}
	return exceeds, above
}

// rankMemory: usage above requests first, then lower priority, then more memory above requests.
func rankMemory(pods []*corev1.Pod, stats podStats) {
	exceeds, above := usageCompare(stats, func(_ *corev1.Pod, s statsapi.PodStats) int64 { return memoryUsage(s) }, corev1.ResourceMemory)
	orderedBy(pods, exceeds, byPriority, above)
}

// rankPIDs: lower priority first, then more processes.
func rankPIDs(pods []*corev1.Pod, stats podStats) {
	procs := func(p *corev1.Pod) (uint64, bool) {
		s, ok := stats(p.UID)
		if !ok || s.ProcessStats == nil || s.ProcessStats.ProcessCount == nil {
			return 0, ok
		}
		return *s.ProcessStats.ProcessCount, true
	}
	orderedBy(pods, byPriority, func(a, b *corev1.Pod) int {
		pa, oka := procs(a)
		pb, okb := procs(b)
		if !oka || !okb {
			return trueFirst(!oka, !okb)
		}
		return cmp.Compare(pb, pa)
	})
}

// fsParts says which of a pod's disk use counts against a filesystem signal.
type fsParts struct{ rootfs, logs, volumes bool }

// diskUsage is a pod's use of the parts in bytes or, for inodes, in inodes: its containers' writable layers
// and logs, its local volumes (the kubelet's: hostPath and local ephemeral volumes).
func diskUsage(inodes bool, parts fsParts) func(*corev1.Pod, statsapi.PodStats) int64 {
	pick := func(fs *statsapi.FsStats) int64 { return fsUsed(fs, inodes) }
	return func(pod *corev1.Pod, s statsapi.PodStats) int64 {
		var sum int64
		for _, c := range s.Containers {
			if parts.rootfs {
				sum += pick(c.Rootfs)
			}
			if parts.logs {
				sum += pick(c.Logs)
			}
		}
		if !parts.volumes {
			return sum
		}
		local := map[string]bool{}
		for i := range pod.Spec.Volumes {
			if v := &pod.Spec.Volumes[i]; v.HostPath != nil || podrules.IsLocalEphemeralVolume(v) {
				local[v.Name] = true
			}
		}
		for _, v := range s.VolumeStats {
			if local[v.Name] {
				sum += pick(&v.FsStats)
			}
		}
		return sum
	}
}

// fsUsed is a filesystem's bytes used or, for inodes, inodes used (0 when unknown).
func fsUsed(fs *statsapi.FsStats, inodes bool) int64 {
	switch {
	case fs == nil:
		return 0
	case inodes && fs.InodesUsed != nil:
		return int64(*fs.InodesUsed)
	case !inodes && fs.UsedBytes != nil:
		return int64(*fs.UsedBytes)
	}
	return 0
}

// rankDisk: usage above requests first, then lower priority, then more usage above requests.
func rankDisk(inodes bool, parts fsParts) rankFunc {
	name := corev1.ResourceEphemeralStorage
	if inodes {
		name = resourceInodes
	}
	return func(pods []*corev1.Pod, stats podStats) {
		exceeds, above := usageCompare(stats, diskUsage(inodes, parts), name)
		orderedBy(pods, exceeds, byPriority, above)
	}
}

// rankFor is the ranking of a signal (the kubelet's buildSignalToRankFunc, without a split container
// filesystem): with a dedicated image filesystem, nodefs signals rank by logs and local volumes and imagefs
// ones by writable layers; without one, every disk signal ranks by all of them.
func rankFor(signal string, dedicatedImageFs bool) rankFunc {
	all := fsParts{rootfs: true, logs: true, volumes: true}
	nodefs, imagefs := all, all
	if dedicatedImageFs {
		nodefs, imagefs = fsParts{logs: true, volumes: true}, fsParts{rootfs: true}
	}
	switch signal {
	case config.SignalMemoryAvailable, config.SignalAllocatableMemoryAvailable:
		return rankMemory
	case config.SignalPIDAvailable:
		return rankPIDs
	case config.SignalNodeFsAvailable:
		return rankDisk(false, nodefs)
	case config.SignalNodeFsInodesFree:
		return rankDisk(true, nodefs)
	case config.SignalImageFsAvailable, config.SignalContainerFsAvailable:
		return rankDisk(false, imagefs)
	case config.SignalImageFsInodesFree, config.SignalContainerFsInodesFree:
		return rankDisk(true, imagefs)
	}
	return nil
}

// reclaimsFor says which node-level reclaim a disk signal gets (the kubelet's buildSignalToNodeReclaimFuncs
// without a split container filesystem): none for nodefs with a dedicated image filesystem (only logs,
// which the kubelet does not reclaim either), dead containers then unused images otherwise.
func reclaimsFor(signal string, dedicatedImageFs bool) bool {
	switch signal {
	case config.SignalNodeFsAvailable, config.SignalNodeFsInodesFree:
		return !dedicatedImageFs
	case config.SignalImageFsAvailable, config.SignalImageFsInodesFree, config.SignalContainerFsAvailable, config.SignalContainerFsInodesFree:
		return true
	}
	return false
}
