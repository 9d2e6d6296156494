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
