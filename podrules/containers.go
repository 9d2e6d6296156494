package podrules

import corev1 "k8s.io/api/core/v1"

// ContainerKind says in which list of the pod spec a container is declared.
type ContainerKind int

// The kinds of container a pod declares. Sidecars (init containers with restartPolicy Always) are
// InitContainer.
const (
	NoContainer ContainerKind = iota
	RegularContainer
	InitContainer
	EphemeralContainer
)

// FindContainer returns the pod's container of that name and its kind, looking at the regular
// containers first, then the init containers (sidecars included), then the ephemeral containers; it
// returns nil and NoContainer when the pod has none of that name. An ephemeral container is returned as
// a *corev1.Container viewing its EphemeralContainerCommon.
func FindContainer(pod *corev1.Pod, name string) (*corev1.Container, ContainerKind) {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], RegularContainer
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i], InitContainer
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon), EphemeralContainer
		}
	}
	return nil, NoContainer
}
