package runtime

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/podrules"
)

// The kubelet's OOM score adjustments (pkg/kubelet/qos/policy.go).
const (
	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000
)

// The scheduling constants the kubelet uses to recognise node-critical pods.
const (
	systemCriticalPriority  = 2000000000
	systemNodeCriticalClass = "system-node-critical"
)

// qosResources are the resources whose requests and limits decide a QoS class.
var qosResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// GetPodQOS returns the pod's QoS class (Guaranteed, Burstable or BestEffort) like the kubelet's
// k8s.io/kubernetes/pkg/apis/core/v1/helper/qos: the class recorded in the status if any, else the class
// computed from pod-level resources when they are set, else from every init and regular container.
func GetPodQOS(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return ComputePodQOS(pod)
}

// ComputePodQOS evaluates the pod's resources, ignoring the QoS class recorded in its status.
func ComputePodQOS(pod *corev1.Pod) corev1.PodQOSClass {
	if podrules.PodLevelResourcesSet(pod) {
		return requirementsQOS(pod.Spec.Resources)
	}
	var class corev1.PodQOSClass
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			c := requirementsQOS(&cs[i].Resources)
			switch {
			case c == corev1.PodQOSBurstable:
				return c
			case class == "":
				class = c
			case class != c:
				return corev1.PodQOSBurstable
			}
		}
	}
	if class == "" {
		return corev1.PodQOSBestEffort
	}
	return class
}

// requirementsQOS is the QoS shape of one set of requirements.
func requirementsQOS(r *corev1.ResourceRequirements) corev1.PodQOSClass {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	var class corev1.PodQOSClass
	for _, name := range qosResources {
		c := resourceQOS(r, name)
		if c == corev1.PodQOSBurstable || (class != "" && class != c) {
			return corev1.PodQOSBurstable
		}
		class = c
	}
	return class
}

// resourceQOS: BestEffort when request and limit are both zero, Guaranteed when they are equal and
// non-zero, Burstable otherwise.
func resourceQOS(r *corev1.ResourceRequirements, name corev1.ResourceName) corev1.PodQOSClass {
	req, lim := r.Requests[name], r.Limits[name]
	switch {
	case !req.Equal(lim):
		return corev1.PodQOSBurstable
	case req.IsZero():
		return corev1.PodQOSBestEffort
	default:
		return corev1.PodQOSGuaranteed
	}
}

// isCriticalPod: static and mirror pods, and pods at system-critical priority or above.
func isCriticalPod(pod *corev1.Pod) bool {
	if podrules.IsStaticPod(pod) || podrules.IsMirrorPod(pod) {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

// isNodeCriticalPod: a critical pod of priority class system-node-critical.
func isNodeCriticalPod(pod *corev1.Pod) bool {
	return isCriticalPod(pod) && pod.Spec.PriorityClassName == systemNodeCriticalClass
}

// OOMScoreAdjust returns the oom_score_adj for a container like the kubelet's qos policy: -997 for
// Guaranteed and node-critical pods, 1000 for BestEffort, and for Burstable 1000 - 1000*request/capacity
// clamped to [3, 999] (a sidecar gets no more than the smallest regular container).
func OOMScoreAdjust(pod *corev1.Pod, c *corev1.Container, memoryCapacity int64) int {
	if isNodeCriticalPod(pod) {
		return guaranteedOOMScoreAdj
	}
	switch GetPodQOS(pod) {
	case corev1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj
	case corev1.PodQOSBestEffort:
		return besteffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		return besteffortOOMScoreAdj - 1
	}
	var extra int64
	if podrules.PodLevelRequestsSet(pod) {
		extra = remainingPodMemoryPerContainer(pod)
	}
	adj := 1000 - 1000*(c.Resources.Requests.Memory().Value()+extra)/memoryCapacity
	_, kind := podrules.FindContainer(pod, c.Name)
	if kind == podrules.InitContainer && podrules.IsSidecar(c) && len(pod.Spec.Containers) > 0 {
		minAdj := 1000 - 1000*(minRegularContainerMemory(pod)+extra)/memoryCapacity
		adj = min(adj, minAdj)
	}
	return clampBurstableOOMScoreAdj(adj)
}

// clampBurstableOOMScoreAdj keeps Burstable containers above Guaranteed and below BestEffort.
func clampBurstableOOMScoreAdj(adj int64) int {
	if adj < 1000+guaranteedOOMScoreAdj {
		return 1000 + guaranteedOOMScoreAdj
	}
	if adj == besteffortOOMScoreAdj {
		return int(adj - 1)
	}
	return int(adj)
}

func minRegularContainerMemory(pod *corev1.Pod) int64 {
	m := pod.Spec.Containers[0].Resources.Requests.Memory().Value()
	for i := range pod.Spec.Containers[1:] {
		m = min(m, pod.Spec.Containers[i+1].Resources.Requests.Memory().Value())
	}
	return m
}

// remainingPodMemoryPerContainer shares the pod-level memory request that no container claims equally
// among all containers.
func remainingPodMemoryPerContainer(pod *corev1.Pod) int64 {
	podReq := pod.Spec.Resources.Requests.Memory().Value()
	n := int64(len(pod.Spec.Containers) + len(pod.Spec.InitContainers))
	if podReq == 0 || n == 0 {
		return 0
	}
	containers := podrules.PodRequests(pod, podrules.ResourceOptions{ExcludeOverhead: true, SkipPodLevelResources: true})
	remaining := max(podReq-containers.Memory().Value(), 0)
	return remaining / n
}
