package podrules

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestResizeRestarts(t *testing.T) {
	c := &corev1.Container{ResizePolicy: []corev1.ContainerResizePolicy{
		{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
		{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
	}}
	if ResizeRestarts(c, corev1.ResourceCPU) || !ResizeRestarts(c, corev1.ResourceMemory) {
		t.Error("want cpu in place, memory restarting")
	}
	if ResizeRestarts(&corev1.Container{}, corev1.ResourceMemory) {
		t.Error("no policy is NotRequired")
	}
}
