package podstatus

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/podrules"
)

// minMilliCPULimit: a cpu limit at or below it is reported only when the spec asks for that much (the
// kubelet's convertToAPIPodLevelResourcesStatus).
const minMilliCPULimit = 10

// podResources are the pod-level status.resources and status.allocatedResources. allocatedResources is
// the pod's effective requests; resources is the effective requirements, and for a running pod what its
// cgroup is configured with (computed from the spec, as the kubelet configures it).
func (b *builder) podResources() (*corev1.ResourceRequirements, corev1.ResourceList) {
	allocated := podrules.PodRequests(b.pod, podrules.ResourceOptions{})
	if b.old.Phase != corev1.PodRunning {
		res := b.podSpecResources()
		res.Requests = podrules.PodRequests(b.pod, podrules.ResourceOptions{})
		res.Limits = podrules.PodLimits(b.pod, podrules.ResourceOptions{})
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
// derived (ResourceConfigForPod) from the resources last applied to it instead of read back.
func (b *builder) runningPodResources() *corev1.ResourceRequirements {
	res := b.podSpecResources()
	if res.Requests == nil {
		res.Requests = corev1.ResourceList{}
	}
	if res.Limits == nil {
		res.Limits = corev1.ResourceList{}
	}
	cg := podCgroup(b.actuatedPod())
	if cpu := podrules.SharesToMilliCPU(cg.cpuShares); cpu > podrules.MinShares || res.Requests.Cpu().MilliValue() > podrules.MinShares {
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

// actuatedPod is the pod with the resources last applied to its cgroup and containers where they are
// recorded: what its cgroup is configured with while a resize is being applied.
func (b *builder) actuatedPod() *corev1.Pod {
	return podrules.WithAppliedResources(b.pod, b.in.ActuatedPodLevel, b.in.Actuated)
}

// cgroupConfig is what the kubelet writes to a pod's cgroup.
type cgroupConfig struct {
	requests    corev1.ResourceList
	cpuShares   int64
	cpuLimit    *int64 // milli-CPU, nil: no quota
	memoryLimit *int64 // bytes, nil: no limit
}

// podCgroup is the pod cgroup as the kubelet configures it (podrules.PodCgroupResources), with the cpu
// limit in milli-CPU, and the pod's requests.
func podCgroup(pod *corev1.Pod) cgroupConfig {
	pc := podrules.PodCgroupResources(pod, podrules.GetPodQOS(pod))
	cg := cgroupConfig{requests: podrules.PodRequests(pod, podrules.ResourceOptions{}), cpuShares: pc.CPUShares}
	if pc.CPUQuota != nil {
		if milli := podrules.QuotaToMilliCPU(*pc.CPUQuota, podrules.QuotaPeriod); milli > 0 {
			cg.cpuLimit = &milli
		}
	}
	if pc.MemoryLimit != nil && *pc.MemoryLimit > 0 {
		cg.memoryLimit = pc.MemoryLimit
	}
	return cg
}
