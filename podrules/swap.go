package podrules

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// The swap behaviors of memorySwap.swapBehavior ("" is NoSwap).
const (
	NoSwap      = "NoSwap"
	LimitedSwap = "LimitedSwap"
)

// LimitedSwapEligible says whether container c of pod, of QoS class class, may swap under LimitedSwap (the
// kubelet's GetContainerSwapBehavior and its limit calculator): only on cgroup v2, never for a critical pod, only
// in a Burstable pod, and only for a container that requests memory with a limit other than its request.
// Everything else runs with NoSwap.
func LimitedSwapEligible(pod *corev1.Pod, c *corev1.Container, class corev1.PodQOSClass, cgroupV2 bool) bool {
	if !cgroupV2 || IsCriticalPod(pod) || class != corev1.PodQOSBurstable {
		return false
	}
	req, lim := c.Resources.Requests.Memory(), c.Resources.Limits.Memory()
	if req.IsZero() && lim.IsZero() {
		return false
	}
	return req.Cmp(*lim) != 0
}

// LimitedSwapBytes is an eligible container's swap under LimitedSwap (KEP-2400's proportional share): its
// memory request's part of the node's memory, of the node's swap. An error for a node without memory or a
// request larger than the node's memory, where the kubelet gives no swap.
func LimitedSwapBytes(memoryRequest, nodeMemory, nodeSwap int64) (int64, error) {
	if nodeMemory <= 0 {
		return 0, fmt.Errorf("total node memory is 0")
	}
	if memoryRequest > nodeMemory {
		return 0, fmt.Errorf("container request %d is larger than total node memory %d", memoryRequest, nodeMemory)
	}
	return int64(float64(memoryRequest) / float64(nodeMemory) * float64(nodeSwap)), nil
}
