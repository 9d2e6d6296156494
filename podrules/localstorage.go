package podrules

import corev1 "k8s.io/api/core/v1"

// IsLocalEphemeralVolume says whether a volume lives on the node's disk for the pod's lifetime and counts
// as the pod's local ephemeral storage (the kubelet's IsLocalEphemeralVolume): a gitRepo, an emptyDir on
// the default medium, a configMap.
func IsLocalEphemeralVolume(v *corev1.Volume) bool {
	return v.GitRepo != nil || v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumDefault || v.ConfigMap != nil
}

// HasLocalStorageLimit says whether the pod's local storage has a limit the eviction manager enforces
// (with localStorageCapacityIsolation): an emptyDir with a positive sizeLimit, or an ephemeral-storage
// limit among its limits (PodLimits: a container's, a sidecar's or an init container's).
func HasLocalStorageLimit(pod *corev1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if ed := pod.Spec.Volumes[i].EmptyDir; ed != nil && ed.SizeLimit != nil && ed.SizeLimit.Sign() > 0 {
			return true
		}
	}
	_, ok := PodLimits(pod, ResourceOptions{})[corev1.ResourceEphemeralStorage]
	return ok
}
