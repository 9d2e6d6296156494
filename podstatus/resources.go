package podstatus

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// The kubelet's cgroup constants (pkg/kubelet/cm).
const (
	minShares        = 2
	maxShares        = 262144
	sharesPerCPU     = 1024
	milliCPUToCPU    = 1000
	quotaPeriod      = 100000
	minQuotaPeriod   = 1000
	minMilliCPULimit = 10
)

// podResources are the pod-level status.resources and status.allocatedResources. allocatedResources is
// the pod's effective requests; resources is the effective requirements, and for a running pod what its
// cgroup is configured with (computed from the spec, as the kubelet configures it).
func (b *builder) podResources() (*corev1.ResourceRequirements, corev1.ResourceList) {
	allocated := resourcehelper.PodRequests(b.pod, resourcehelper.PodResourcesOptions{})
	if b.old.Phase != corev1.PodRunning {
		res := b.podSpecResources()
		res.Requests = resourcehelper.PodRequests(b.pod, resourcehelper.PodResourcesOptions{})
		res.Limits = resourcehelper.PodLimits(b.pod, resourcehelper.PodResourcesOptions{})
		return res, allocated
	}
	return b.runningPodResources(), allocated
}

func (b *builder) podSpecResources() *corev1.ResourceRequirements {
	if b.pod.Spec.Resources == nil {
		return &corev1.ResourceRequirements{}
	}
	return b.pod.Spec.Resources.DeepCopy()
}

// runningPodResources is the kubelet's convertToAPIPodLevelResourcesStatus with the pod cgroup's values
// derived from the spec (ResourceConfigForPod) instead of read back.
func (b *builder) runningPodResources() *corev1.ResourceRequirements {
	res := b.podSpecResources()
	if res.Requests == nil {
		res.Requests = corev1.ResourceList{}
	}
	if res.Limits == nil {
		res.Limits = corev1.ResourceList{}
	}
	cg := podCgroup(b.pod)
	if cpu := sharesToMilliCPU(cg.cpuShares); cpu > minShares || res.Requests.Cpu().MilliValue() > minShares {
		res.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(cpu, resource.DecimalSI)
	}
	if _, ok := res.Requests[corev1.ResourceMemory]; !ok {
		if mem, ok := cg.requests[corev1.ResourceMemory]; ok {
			res.Requests[corev1.ResourceMemory] = mem
		}
	}
	b.setRunningLimit(res.Limits, corev1.ResourceCPU, cg.cpuLimit, minMilliCPULimit, resource.DecimalSI)
	b.setRunningLimit(res.Limits, corev1.ResourceMemory, cg.memoryLimit, 0, resource.BinarySI)
	return res
}

// setRunningLimit sets a limit from the cgroup (cpu in milli, memory in bytes), or keeps the old status'
// value when the cgroup has none.
func (b *builder) setRunningLimit(limits corev1.ResourceList, name corev1.ResourceName, v *int64, floor int64, f resource.Format) {
	if v == nil {
		if b.old.Resources != nil {
			if q, ok := b.old.Resources.Limits[name]; ok {
				limits[name] = q.DeepCopy()
			}
		}
		return
	}
	if name == corev1.ResourceMemory {
		limits[name] = *resource.NewQuantity(*v, f)
		return
	}
	cur := limits[name]
	if *v > floor || cur.MilliValue() > floor {
		limits[name] = *resource.NewMilliQuantity(*v, f)
	}
}

// cgroupConfig is what the kubelet writes to a pod's cgroup.
type cgroupConfig struct {
	requests    corev1.ResourceList
	cpuShares   int64
	cpuLimit    *int64 // milli-CPU, nil: no quota
	memoryLimit *int64 // bytes, nil: no limit
}

// podCgroup computes the pod cgroup settings as the kubelet's ResourceConfigForPod does.
func podCgroup(pod *corev1.Pod) cgroupConfig {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	cg := cgroupConfig{requests: reqs, cpuShares: minShares}
	class := GetPodQOS(pod)
	if class == corev1.PodQOSBestEffort {
		return cg
	}
	cg.cpuShares = milliCPUToShares(reqs.Cpu().MilliValue())
	cpuDeclared, memDeclared := limitsDeclared(pod)
	if class == corev1.PodQOSGuaranteed || cpuDeclared {
		if milli := quotaToMilliCPU(milliCPUToQuota(limits.Cpu().MilliValue())); milli > 0 {
			cg.cpuLimit = &milli
		}
	}
	if class == corev1.PodQOSGuaranteed || memDeclared {
		if mem := limits.Memory().Value(); mem > 0 {
			cg.memoryLimit = &mem
		}
	}
	return cg
}

// limitsDeclared: every container (or the pod) sets a cpu / memory limit.
func limitsDeclared(pod *corev1.Pod) (cpu, memory bool) {
	cpu, memory = true, true
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			cpu = cpu && !cs[i].Resources.Limits.Cpu().IsZero()
			memory = memory && !cs[i].Resources.Limits.Memory().IsZero()
		}
	}
	if pod.Spec.Resources != nil && resourcehelper.IsPodLevelResourcesSet(pod) {
		cpu = cpu || !pod.Spec.Resources.Limits.Cpu().IsZero()
		memory = memory || !pod.Spec.Resources.Limits.Memory().IsZero()
	}
	return cpu, memory
}

func milliCPUToShares(milliCPU int64) int64 {
	if milliCPU == 0 {
		return minShares
	}
	return min(max(milliCPU*sharesPerCPU/milliCPUToCPU, minShares), maxShares)
}

func sharesToMilliCPU(shares int64) int64 {
	if shares < minShares {
		return 0
	}
	return int64(math.Ceil(float64(shares*milliCPUToCPU) / float64(sharesPerCPU)))
}

func milliCPUToQuota(milliCPU int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	return max(milliCPU*quotaPeriod/milliCPUToCPU, minQuotaPeriod)
}

func quotaToMilliCPU(quota int64) int64 {
	return quota * milliCPUToCPU / quotaPeriod
}
