package podrules

import corev1 "k8s.io/api/core/v1"

// ResizeRestarts reports whether an in-place resize of resource name restarts container c: its
// resizePolicy for that resource is RestartContainer (NotRequired, the default, resizes it in place).
func ResizeRestarts(c *corev1.Container, name corev1.ResourceName) bool {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == name {
			return p.RestartPolicy == corev1.RestartContainer
		}
	}
	return false
}

// WithAppliedResources is the pod as its cgroup and containers were last given resources: the pod-level
// resources podLevel recorded (when the pod has pod-level resources) and each init and regular container's
// that container recorded in place of the spec's (nil, or ok false: nothing recorded). With nothing
// recorded it is the pod itself, which the caller must not change; otherwise a copy.
func WithAppliedResources(pod *corev1.Pod, podLevel func() (*corev1.ResourceRequirements, bool),
	container func(name string) (corev1.ResourceRequirements, bool)) *corev1.Pod {
	out := pod
	own := func() *corev1.Pod {
		if out == pod {
			out = pod.DeepCopy()
		}
		return out
	}
	if podLevel != nil && pod.Spec.Resources != nil {
		if r, ok := podLevel(); ok {
			own().Spec.Resources = r
		}
	}
	if container == nil {
		return out
	}
	for i := range pod.Spec.InitContainers {
		if r, ok := container(pod.Spec.InitContainers[i].Name); ok {
			own().Spec.InitContainers[i].Resources = r
		}
	}
	for i := range pod.Spec.Containers {
		if r, ok := container(pod.Spec.Containers[i].Name); ok {
			own().Spec.Containers[i].Resources = r
		}
	}
	return out
}
