package podrules

import corev1 "k8s.io/api/core/v1"

// OwnUserNamespace tells whether the pod runs in a user namespace of its own (spec.hostUsers: false)
// rather than the node's.
func OwnUserNamespace(pod *corev1.Pod) bool {
	return pod != nil && pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers
}
