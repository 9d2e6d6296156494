package podstatus

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A container's allocatedResourcesStatus is the health of the devices it was given, as the kubelet's
// UpdateAllocatedResourcesStatus sets it for the regular containers.
func TestAllocatedResourcesStatusFromDeviceHealth(t *testing.T) {
	pod := withStatus(newPod(corev1.RestartPolicyAlways, "app"), runningStatus("containerd://app-0"))
	health := []corev1.ResourceStatus{{Name: "example.com/gpu", Resources: []corev1.ResourceHealth{
		{ResourceID: "gpu-0", Health: corev1.ResourceHealthStatusUnhealthy}}}}
	in := baseInput(pod, podRuntime(readySandbox("10.0.0.5"), runningAttempt("app", 0)))
	in.DeviceHealth = func(container string) []corev1.ResourceStatus {
		if container == "app" {
			return health
		}
		return nil
	}
	s := Compute(in)
	if got := s.ContainerStatuses[0].AllocatedResourcesStatus; !reflect.DeepEqual(got, health) {
		t.Fatalf("allocatedResourcesStatus = %+v, want %+v", got, health)
	}
	in.DeviceHealth = nil
	if got := Compute(in).ContainerStatuses[0].AllocatedResourcesStatus; got != nil {
		t.Fatalf("allocatedResourcesStatus without devices = %+v", got)
	}
}
