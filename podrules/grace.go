package podrules

import corev1 "k8s.io/api/core/v1"

// MinimumGracePeriod is the shortest stop timeout a container is given, whatever is left of its grace
// period (the kubelet's minimumGracePeriodInSeconds).
const MinimumGracePeriod = 2

// ContainerKillGracePeriod is the grace period of a container killed while its pod runs (the kubelet's
// setTerminationGracePeriod): the pod's deletion grace period once one is set; else, for a container a
// failed liveness or startup probe kills, that probe's terminationGracePeriodSeconds when set (probeGrace,
// longer or shorter than the pod's); else the pod's terminationGracePeriodSeconds; else
// MinimumGracePeriod.
func ContainerKillGracePeriod(pod *corev1.Pod, probeGrace *int64) int64 {
	switch {
	case pod == nil:
		return MinimumGracePeriod
	case pod.DeletionGracePeriodSeconds != nil:
		return *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		if probeGrace != nil {
			return *probeGrace
		}
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return MinimumGracePeriod
}
