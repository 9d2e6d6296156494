package podrules

import corev1 "k8s.io/api/core/v1"

// SystemCriticalPriority is the priority of system-cluster-critical, the lowest critical priority (the API's
// scheduling.SystemCriticalPriority, twice the highest user-definable priority).
const SystemCriticalPriority int32 = 2 * 1000000000

// SystemNodeCritical is the priority class of the pods a node cannot do without (scheduling.SystemNodeCritical).
const SystemNodeCritical = "system-node-critical"

// IsCriticalPod reports whether the node must keep pod running even under resource pressure (the kubelet's
// kubetypes.IsCriticalPod): a static pod, a mirror pod, or a pod whose priority is at least
// system-cluster-critical's. The eviction manager never evicts one, and admits one under pressure.
func IsCriticalPod(pod *corev1.Pod) bool {
	if IsStaticPod(pod) || IsMirrorPod(pod) {
		return true
	}
	return pod != nil && pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority
}

// IsNodeCriticalPod reports whether pod is a critical pod of priority class system-node-critical (the kubelet's
// kubetypes.IsNodeCriticalPod): its containers get the Guaranteed pods' OOM score whatever its QoS class.
func IsNodeCriticalPod(pod *corev1.Pod) bool {
	return IsCriticalPod(pod) && pod.Spec.PriorityClassName == SystemNodeCritical
}

// IsTerminalPhase says whether a pod phase is final: Succeeded or Failed.
func IsTerminalPhase(p corev1.PodPhase) bool {
	return p == corev1.PodSucceeded || p == corev1.PodFailed
}

// PodPriority is the pod's priority, 0 when unset (corev1helpers.PodPriority).
func PodPriority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}
