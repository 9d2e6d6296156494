package podsyncer

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/podrules"
)

// PodRef references a pod in events.
func PodRef(pod *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion,
	}
}

// containerRef references a container of a pod the way the kubelet does (fieldPath
// "spec.containers{name}", "spec.initContainers{name}" or "spec.ephemeralContainers{name}"), so
// `kubectl describe` shows it.
func containerRef(pod *corev1.Pod, c *corev1.Container) *corev1.ObjectReference {
	ref := PodRef(pod)
	if c == nil || c.Name == "" { // no container: the pull of an image volume
		return ref
	}
	switch _, kind := podrules.FindContainer(pod, c.Name); kind {
	case podrules.InitContainer:
		ref.FieldPath = "spec.initContainers{" + c.Name + "}"
	case podrules.EphemeralContainer:
		ref.FieldPath = "spec.ephemeralContainers{" + c.Name + "}"
	default:
		ref.FieldPath = "spec.containers{" + c.Name + "}"
	}
	return ref
}
