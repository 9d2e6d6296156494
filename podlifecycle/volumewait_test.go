package podlifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// waitingVolumes is a volume manager whose volumes wait (for an attach, say) without failing: SetUp reports no
// error and the pod's volumes are not ready until attached is set.
type waitingVolumes struct {
	attached bool
}

func (v *waitingVolumes) Devices(*corev1.Pod, *corev1.Container) ([]*runtimeapi.Device, error) {
	return nil, nil
}
func (v *waitingVolumes) TearDown(context.Context, types.UID) error { return nil }

func (v *waitingVolumes) SetUp(context.Context, *corev1.Pod) []error { return nil }
func (v *waitingVolumes) Ready(types.UID) bool                       { return v.attached }
func (v *waitingVolumes) Mounts(*corev1.Pod, *corev1.Container, map[string]string) ([]*runtimeapi.Mount, error) {
	return nil, nil
}
func (v *waitingVolumes) HostPath(*corev1.Pod, string) (string, error) {
	return "", errors.New("no volumes")
}

// A pod whose volume waits without an error starts no container and is looked at again within the
// volume-wait period (the kubelet polls every 300 ms), not at the next resync.
func TestWaitingVolumeHoldsContainersAndRequeuesSoon(t *testing.T) {
	b := newLifecycleBed(t)
	vols := &waitingVolumes{}
	b.useVolumes(vols)
	b.create(bedPod("web"))
	res := b.sync("web")
	if n := len(b.containers("web")); n != 0 {
		t.Fatalf("%d containers created while the pod's volume waits, want 0", n)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 500*time.Millisecond {
		t.Fatalf("requeued after %v while a volume waits, want within 500ms", res.RequeueAfter)
	}
	vols.attached = true
	b.sync("web")
	if n := len(b.containers("web")); n != 1 {
		t.Fatalf("%d containers once the volume is ready, want 1", n)
	}
}

// limitError is a volume set-up failure that rejects the pod (as volumes.AttachLimitExceededError).
type limitError struct{}

func (limitError) Error() string {
	return "Node has reached its volume attachment limit, rejecting pod."
}
func (limitError) RejectReason() string { return "VolumeAttachmentLimitExceeded" }

// rejectingVolumes waits, then reports a set-up failure that rejects the pod.
type rejectingVolumes struct {
	waitingVolumes
	reject bool
}

func (v *rejectingVolumes) SetUp(context.Context, *corev1.Pod) []error {
	if v.reject {
		return []error{fmt.Errorf("pod volumes: %w", limitError{})}
	}
	return nil
}

// A pod whose volumes cannot be attached at the node's attachment limit is rejected as the kubelet's
// rejectPod: a Warning event with the reason, Failed with only the reason and "Pod was rejected: ...", no
// FailedMount event; as its volumes were never ready, it never got a sandbox, and no container ever starts.
func TestVolumeRejectionFailsThePodWithoutASandbox(t *testing.T) {
	b := newLifecycleBed(t)
	vols := &rejectingVolumes{}
	b.useVolumes(vols)
	b.create(bedPod("web"))
	b.sync("web")
	vols.reject = true
	b.sync("web")
	for range 3 {
		b.sync("web")
	}
	st := b.pod("web").Status
	want := "Pod was rejected: Node has reached its volume attachment limit, rejecting pod."
	if st.Phase != corev1.PodFailed || st.Reason != "VolumeAttachmentLimitExceeded" || st.Message != want || len(st.ContainerStatuses) != 0 {
		t.Fatalf("status %+v, want Failed, VolumeAttachmentLimitExceeded, %q, no container statuses", st, want)
	}
	if n := len(b.containers("web")); n != 0 {
		t.Errorf("%d containers created, want none", n)
	}
	if got := b.calls("RunPodSandbox"); len(got) != 0 {
		t.Error("a sandbox was made for a pod whose volumes were not ready")
	}
	var events []string
	for len(b.rec.Events) > 0 {
		events = append(events, <-b.rec.Events)
	}
	if !slices.Contains(events, "Warning VolumeAttachmentLimitExceeded Node has reached its volume attachment limit, rejecting pod.") ||
		slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, "FailedMount") }) {
		t.Errorf("events %q, want the rejection's and no FailedMount", events)
	}
}
