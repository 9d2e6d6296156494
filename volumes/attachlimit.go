package volumes

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
)

// attachMountTimeout is how long a pod's volumes may wait before the agent looks for a reason to give up on
// the pod (the kubelet's podAttachAndMountTimeout).
const attachMountTimeout = 2*time.Minute + 3*time.Second

// AttachLimitExceededError rejects a pod whose volumes waited attachMountTimeout while one of them cannot be
// attached because the node reached its CSI driver's attachment limit (the VolumeAttachment's attach error
// is ResourceExhausted, and the CSIDriver refreshes its allocatable count: nodeAllocatableUpdatePeriodSeconds).
// The message is the kubelet's.
type AttachLimitExceededError struct {
	// Unmounted and Unattached are the pod's volumes (by name, sorted) not set up, and those of them
	// waiting for their attach.
	Unmounted, Unattached []string
}

func (e *AttachLimitExceededError) Error() string {
	return fmt.Sprintf("Node has reached its volume attachment limit, rejecting pod. unmounted volumes=%v, unattached volumes=%v, "+
		"failed to process volumes=[]: timed out waiting for the condition", e.Unmounted, e.Unattached)
}

// RejectReason is the reason of the pod's Failed status and of its event.
func (e *AttachLimitExceededError) RejectReason() string { return "VolumeAttachmentLimitExceeded" }

// checkAttachLimit keeps when the pod's volumes started waiting (pv.mu held) and, once they waited
// attachMountTimeout, returns an *AttachLimitExceededError when one of those waiting for their attach
// waits for a driver at its attachment limit; that driver is asked its node information again.
func (m csiVolumes) checkAttachLimit(ctx context.Context, pod *corev1.Pod, pv *podVolumes, ready bool) error {
	if ready {
		pv.waitingSince = time.Time{}
		return nil
	}
	now := m.clock().Now()
	if pv.waitingSince.IsZero() {
		pv.waitingSince = now
	}
	if now.Sub(pv.waitingSince) < attachMountTimeout || m.CSIObjects == nil {
		return nil
	}
	pv.waitingSince = now // as the kubelet's next wait, the next look is one timeout later
	var unmounted, unattached []string
	exhausted := false
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if pv.done[vol.Name] {
			continue
		}
		unmounted = append(unmounted, vol.Name)
		src := m.csiv().waitingCSISource(ctx, pod, vol, pv)
		if src == nil {
			continue
		}
		if info, err := m.csiv().driverInfo(ctx, src.Driver); err != nil || !info.attachRequired {
			continue
		}
		unattached = append(unattached, vol.Name)
		if !exhausted && m.csiv().attachLimitReached(ctx, src.Driver, src.VolumeHandle) {
			exhausted = true
		}
	}
	if !exhausted {
		return nil
	}
	slices.Sort(unmounted)
	slices.Sort(unattached)
	return &AttachLimitExceededError{Unmounted: unmounted, Unattached: unattached}
}

// waitingCSISource is the CSI source of the PersistentVolume of a claim volume not set up yet, nil for any
// other volume.
func (m csiVolumes) waitingCSISource(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, pv *podVolumes) *corev1.CSIPersistentVolumeSource {
	if vol.PersistentVolumeClaim == nil && vol.Ephemeral == nil {
		return nil
	}
	cv := pv.claims[vol.Name]
	if cv == nil {
		var err error
		if cv, err = m.claimv().resolveClaim(ctx, pod, vol); err != nil {
			return nil
		}
	}
	return cv.pv.Spec.CSI
}

// attachLimitReached says whether the volume's attach failed for the driver's attachment limit on this
// node, for a driver whose allocatable count is refreshed; if so, the driver is asked again at once.
func (m csiVolumes) attachLimitReached(ctx context.Context, driver, handle string) bool {
	d, err := m.CSIObjects.GetCSIDriver(ctx, driver)
	if err != nil || d.Spec.NodeAllocatableUpdatePeriodSeconds == nil || *d.Spec.NodeAllocatableUpdatePeriodSeconds <= 0 {
		return false
	}
	va, err := m.CSIObjects.GetVolumeAttachment(ctx, attachmentName(handle, driver, m.NodeName))
	if err != nil {
		return false
	}
	e := va.Status.AttachError
	if e == nil || e.ErrorCode == nil || *e.ErrorCode != int32(codes.ResourceExhausted) {
		return false
	}
	if m.RefreshCSIDriver != nil {
		m.RefreshCSIDriver(ctx, driver)
	}
	return true
}
