package podstatus

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
)

// actuated is the container's record of applied resources, if the caller keeps one.
func (in Input) actuated(container string) *corev1.ResourceRequirements {
	if in.Actuated == nil {
		return nil
	}
	if r, ok := in.Actuated(container); ok {
		return &r
	}
	return nil
}

// reported are the resources the runtime says a container runs with (the kubelet's
// toKubeContainerResources), with what it does not say taken from the actuated record: the memory request
// always, everything when the runtime reports nothing. nil entries are unknown.
type reported struct {
	cpuRequest, cpuLimit, memoryRequest, memoryLimit *resource.Quantity
}

func reportedResources(linux *runtimeapi.LinuxContainerResources, actuated *corev1.ResourceRequirements) reported {
	var r reported
	if linux != nil {
		if linux.CpuPeriod > 0 {
			if milli := podrules.QuotaToMilliCPU(linux.CpuQuota, linux.CpuPeriod); milli > 0 {
				r.cpuLimit = resource.NewMilliQuantity(milli, resource.DecimalSI)
			}
		}
		if milli := podrules.SharesToMilliCPU(linux.CpuShares); milli > 0 {
			r.cpuRequest = resource.NewMilliQuantity(milli, resource.DecimalSI)
		}
		if linux.MemoryLimitInBytes > 0 {
			r.memoryLimit = resource.NewQuantity(linux.MemoryLimitInBytes, resource.BinarySI)
		}
	}
	if actuated == nil {
		return r
	}
	if r.cpuRequest == nil && r.cpuLimit == nil && r.memoryLimit == nil {
		return reported{
			cpuRequest: actuated.Requests.Cpu(), cpuLimit: actuated.Limits.Cpu(),
			memoryRequest: actuated.Requests.Memory(), memoryLimit: actuated.Limits.Memory(),
		}
	}
	if q := actuated.Requests[corev1.ResourceMemory]; !q.IsZero() {
		r.memoryRequest = &q
	}
	return r
}

// statusResources are a container's status.resources (the kubelet's convertContainerStatusResources): for
// a running container, its allocated resources with the cpu and memory the runtime reports in place of
// the allocated ones (a cpu value at or below the runtime's minimum, 2m shares or a 10m quota, stays as
// allocated when the allocation is that small too); what is not reported keeps the value the last status
// showed for the same running container. A container that does not run shows its allocation.
func statusResources(allocated *corev1.Container, a *runtime.ContainerStatus, st, old *corev1.ContainerStatus,
	actuated *corev1.ResourceRequirements) *corev1.ResourceRequirements {
	res := allocated.Resources.DeepCopy()
	if a.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return res
	}
	rep := reportedResources(a.Resources, actuated)
	var prev *corev1.ResourceRequirements
	if old != nil && old.State.Running != nil && old.ContainerID == st.ContainerID && old.Resources != nil {
		prev = old.Resources
	}
	if res.Limits != nil {
		setReported(res.Limits, prevList(prev, true), corev1.ResourceCPU, rep.cpuLimit, minMilliCPULimit)
		setReported(res.Limits, prevList(prev, true), corev1.ResourceMemory, rep.memoryLimit, -1)
	}
	if res.Requests != nil {
		setReported(res.Requests, prevList(prev, false), corev1.ResourceCPU, rep.cpuRequest, podrules.MinShares)
		setReported(res.Requests, prevList(prev, false), corev1.ResourceMemory, rep.memoryRequest, -1)
	}
	return res
}

func prevList(prev *corev1.ResourceRequirements, limits bool) corev1.ResourceList {
	switch {
	case prev == nil:
		return nil
	case limits:
		return prev.Limits
	}
	return prev.Requests
}

// setReported puts the reported value of name into list; for cpu (minMilli >= 0) only when it or the
// allocated value is above minMilli. Without a reported value the previous status' value is kept.
func setReported(list, prev corev1.ResourceList, name corev1.ResourceName, q *resource.Quantity, minMilli int64) {
	if q == nil {
		if v, ok := prev[name]; ok {
			list[name] = v.DeepCopy()
		}
		return
	}
	if minMilli >= 0 {
		allocated := list[name]
		if q.MilliValue() <= minMilli && allocated.MilliValue() <= minMilli {
			return
		}
	}
	list[name] = q.DeepCopy()
}
