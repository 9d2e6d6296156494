package podconfig

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/podrules"
)

// The kubelet's OOM score adjustments (pkg/kubelet/qos/policy.go).
const (
	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000
)

// OOMScoreAdjust returns the oom_score_adj for a container like the kubelet's qos policy: -997 for
// Guaranteed and node-critical pods, 1000 for BestEffort, and for Burstable 1000 - 1000*request/capacity
// clamped to [3, 999] (a sidecar gets no more than the smallest regular container).
func OOMScoreAdjust(pod *corev1.Pod, c *corev1.Container, memoryCapacity int64) int {
	if podrules.IsNodeCriticalPod(pod) {
		return guaranteedOOMScoreAdj
	}
	switch podrules.GetPodQOS(pod) {
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
