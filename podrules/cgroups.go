package podrules

import corev1 "k8s.io/api/core/v1"

// The kubelet's CFS and cgroup constants (pkg/kubelet/cm).
const (
	MinShares      = 2
	MaxShares      = 262144
	SharesPerCPU   = 1024
	MilliCPUToCPU  = 1000
	QuotaPeriod    = 100000 // µs: the default cpuCFSQuotaPeriod
	MinQuotaPeriod = 1000   // µs: the smallest CFS quota
)

// MilliCPUToShares converts a cpu request in milli-CPU to cpu.shares, as the kubelet: none (0) is the
// minimum, 2; the result is kept within [MinShares, MaxShares].
func MilliCPUToShares(milliCPU int64) int64 {
	if milliCPU == 0 {
		return MinShares
	}
	return min(max(milliCPU*SharesPerCPU/MilliCPUToCPU, MinShares), MaxShares)
}

// SharesToMilliCPU is the cpu request cpu.shares stands for (0 below the minimum), rounded up.
func SharesToMilliCPU(shares int64) int64 {
	if shares < MinShares {
		return 0
	}
	return (shares*MilliCPUToCPU + SharesPerCPU - 1) / SharesPerCPU
}

// MilliCPUToQuota converts a cpu limit in milli-CPU to a CFS quota over period (µs), as the kubelet: no
// limit (0) is no quota (0); a quota is at least MinQuotaPeriod.
func MilliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	return max(milliCPU*period/MilliCPUToCPU, MinQuotaPeriod)
}

// QuotaToMilliCPU is the cpu limit a CFS quota over period stands for.
func QuotaToMilliCPU(quota, period int64) int64 {
	return quota * MilliCPUToCPU / period
}

// PodCgroup is what the kubelet writes to a pod's cgroup: cpu shares always; a CFS quota (µs per
// QuotaPeriod) and a memory limit (bytes) only where the QoS class and the declared limits call for them
// (nil: none); huge page limits (bytes by page size in bytes) for the sizes the pod requests, every other
// size of the host being limited to 0.
type PodCgroup struct {
	CPUShares      int64
	CPUQuota       *int64
	MemoryLimit    *int64
	HugePageLimits map[int64]int64
}

// PodCgroupResources is the kubelet's ResourceConfigForPod for a pod of QoS class class (with the CFS quota
// enforced and the default period): BestEffort pods get the minimum cpu shares and nothing else;
// Guaranteed pods shares from their requests, a quota and a memory limit from their limits; Burstable
// pods shares from their requests, and the quota or the memory limit only when every container (or the
// pod-level resources) declares that limit. Requests and limits are PodRequests and PodLimits, overhead
// included. Every class gets the huge pages it requests (HugePageLimits of its requests).
func PodCgroupResources(pod *corev1.Pod, class corev1.PodQOSClass) PodCgroup {
	reqs := PodRequests(pod, ResourceOptions{})
	if class == corev1.PodQOSBestEffort {
		return PodCgroup{CPUShares: MinShares, HugePageLimits: HugePageLimits(reqs)}
	}
	limits := PodLimits(pod, ResourceOptions{})
	out := PodCgroup{CPUShares: MilliCPUToShares(reqs.Cpu().MilliValue()), HugePageLimits: HugePageLimits(reqs)}
	cpuDeclared, memDeclared := limitsDeclared(pod)
	if class == corev1.PodQOSGuaranteed || cpuDeclared {
		quota := MilliCPUToQuota(limits.Cpu().MilliValue(), QuotaPeriod)
		out.CPUQuota = &quota
	}
	if class == corev1.PodQOSGuaranteed || memDeclared {
		mem := limits.Memory().Value()
		out.MemoryLimit = &mem
	}
	return out
}

// limitsDeclared: every container sets a cpu / memory limit, or the pod-level resources do.
func limitsDeclared(pod *corev1.Pod) (cpu, memory bool) {
	cpu, memory = true, true
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			cpu = cpu && !cs[i].Resources.Limits.Cpu().IsZero()
			memory = memory && !cs[i].Resources.Limits.Memory().IsZero()
		}
	}
	if pod.Spec.Resources != nil && PodLevelResourcesSet(pod) {
		cpu = cpu || !pod.Spec.Resources.Limits.Cpu().IsZero()
		memory = memory || !pod.Spec.Resources.Limits.Memory().IsZero()
	}
	return cpu, memory
}
