package volumes

import (
	"context"
	"fmt"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/volumes/csi"
)

// resizeConditions are the claim conditions of a resize: a finished node expansion clears them.
var resizeConditions = map[corev1.PersistentVolumeClaimConditionType]bool{
	corev1.PersistentVolumeClaimFileSystemResizePending: true,
	corev1.PersistentVolumeClaimResizing:                true,
	corev1.PersistentVolumeClaimControllerResizeError:   true,
	corev1.PersistentVolumeClaimNodeResizeError:         true,
}

// expandInUse expands a published CSI volume on this node when its PersistentVolume grew past the
// claim's capacity and the resizer asks for node expansion (allocatedResourceStatuses[storage]
// NodeResizePending or NodeResizeInProgress), as the kubelet's node expander: the claim is marked
// NodeResizeInProgress, the driver's NodeExpandVolume is called on the published path, then the claim's
// capacity becomes the volume's, its resize status and conditions are cleared and FileSystemResizeSuccess
// is recorded on the pod and the claim. A failure is written on the claim (NodeResizeError, or
// NodeResizeInfeasible for a final one) and retried at a later sync. A claim or volume that cannot be
// read now is left for a later sync.
func (m claimVolumes) expandInUse(ctx context.Context, pod *corev1.Pod, cv *claimedVolume) {
	src := cv.pv.Spec.CSI
	if src == nil || cv.readOnly || m.ClaimStatus == nil {
		return
	}
	pvc, err := m.Objects.GetPersistentVolumeClaim(ctx, cv.pvc.Namespace, cv.pvc.Name)
	if err != nil {
		return
	}
	pv, err := m.Objects.GetPersistentVolume(ctx, cv.pv.Name)
	if err != nil || pv.Spec.CSI == nil {
		return
	}
	pvSize, oldSize := pv.Spec.Capacity[corev1.ResourceStorage], pvc.Status.Capacity[corev1.ResourceStorage]
	if pvSize.Cmp(oldSize) <= 0 {
		return
	}
	state := pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage]
	if state != corev1.PersistentVolumeClaimNodeResizePending && state != corev1.PersistentVolumeClaimNodeResizeInProgress {
		return
	}
	// The size the resizer allocated is the target (after a failed expansion the user may have asked for less
	// than the volume's capacity: recovery), else the volume's capacity.
	newSize := pvSize
	if allocated, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; ok {
		newSize = allocated
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("pvc", pvc.Namespace+"/"+pvc.Name, "volume", pv.Name)
	if err := m.claimv().nodeExpand(ctx, pod, cv, pvc, pv, newSize); err != nil {
		log.Error(err, "MountVolume.NodeExpandVolume failed")
	}
}

func (m claimVolumes) nodeExpand(ctx context.Context, pod *corev1.Pod, cv *claimedVolume, pvc *corev1.PersistentVolumeClaim,
	pv *corev1.PersistentVolume, newSize resource.Quantity) error {
	src := pv.Spec.CSI
	client, err := m.csiv().csiClient(src.Driver)
	if err != nil {
		return err
	}
	caps, err := client.NodeCapabilities(ctx)
	if err != nil {
		return err
	}
	if !caps[csipb.NodeServiceCapability_RPC_EXPAND_VOLUME] {
		return nil // the driver has nothing to do on the node; the resizer finishes the claim
	}
	inProgress := withResizeStatus(pvc, corev1.PersistentVolumeClaimNodeResizeInProgress)
	if err := m.ClaimStatus.PatchClaimStatus(ctx, pvc, inProgress); err != nil {
		return fmt.Errorf("MountVolume.NodeExpandVolume failed to mark node expansion in progress: %w", err)
	}
	req, err := m.claimv().expandRequest(ctx, pod, pv, newSize)
	if err != nil {
		return err
	}
	// A new target after an expansion that failed for good (the user lowered the claim to recover) must not fail
	// again: a failure of it is infeasible.
	requested := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	infeasibleOnFailure := cv.expansionFailedFinal && requested.Cmp(newSize) != 0
	start := m.clock().Now()
	err = client.NodeExpandVolume(ctx, req)
	m.observeOp(csiQualifiedPluginName(src.Driver), opExpandVolume, start, err)
	if err != nil {
		if finalExpansionError(err) {
			cv.expansionFailedFinal = true
		}
		return m.claimv().markExpansionFailed(ctx, inProgress, err, infeasibleOnFailure)
	}
	cv.expansionFailedFinal = false
	msg := fmt.Sprintf("MountVolume.NodeExpandVolume succeeded for volume %q %s", pv.Name, m.NodeName)
	if m.Recorder != nil {
		m.Recorder.Event(pod, corev1.EventTypeNormal, "FileSystemResizeSuccessful", msg)
		m.Recorder.Event(pvc, corev1.EventTypeNormal, "FileSystemResizeSuccessful", msg)
	}
	done := inProgress.DeepCopy()
	done.Status.Capacity[corev1.ResourceStorage] = newSize
	delete(done.Status.AllocatedResourceStatuses, corev1.ResourceStorage)
	if len(done.Status.AllocatedResourceStatuses) == 0 {
		done.Status.AllocatedResourceStatuses = nil
	}
	done.Status.Conditions = withoutResizeConditions(done.Status.Conditions)
	if err := m.ClaimStatus.PatchClaimStatus(ctx, inProgress, done); err != nil {
		return fmt.Errorf("mountVolume.NodeExpandVolume update pvc status failed: %w", err)
	}
	return nil
}

// expandRequest is the NodeExpandVolume call for the volume published in the pod (and staged on the node), as
// the kubelet's: a filesystem volume by its pod mount path and global mount, a block volume by its published
// device file and block staging path, with a block capability.
func (m claimVolumes) expandRequest(ctx context.Context, pod *corev1.Pod, pv *corev1.PersistentVolume, newSize resource.Quantity) (*csipb.NodeExpandVolumeRequest, error) {
	src := pv.Spec.CSI
	cv := &claimedVolume{pv: pv}
	v := csiFromPersistent(cv)
	secrets, err := m.csiv().csiSecrets(ctx, src.NodeExpandSecretRef)
	if err != nil {
		return nil, err
	}
	req := &csipb.NodeExpandVolumeRequest{VolumeId: src.VolumeHandle, Secrets: secrets,
		CapacityRange: &csipb.CapacityRange{RequiredBytes: newSize.Value()}}
	if cv.isBlock() {
		p, err := m.blockv().csiBlockPaths(pod.UID, pv.Name)
		if err != nil {
			return nil, err
		}
		req.VolumePath, req.StagingTargetPath, req.VolumeCapability = p.publish, p.staging, v.blockCapability(nil)
		return req, nil
	}
	if req.VolumePath, err = m.claimv().persistentPath(pod.UID, cv); err != nil {
		return nil, err
	}
	if req.StagingTargetPath, err = m.csiv().stagingPath(src.Driver, src.VolumeHandle); err != nil {
		return nil, err
	}
	req.VolumeCapability = v.capability(nil, pod)
	return req, nil
}

// markExpansionFailed writes a failed node expansion on the claim, as the kubelet's node expander: a driver
// saying the volume cannot be expanded while in use (FailedPrecondition) or an error that leaves the operation
// possibly going on (a timeout, Unavailable...) is retried quietly; an invalid, out-of-range or unknown volume
// (or any final failure when infeasible is set) is NodeResizeInfeasible; any other final error a
// NodeResizeError condition.
func (m claimVolumes) markExpansionFailed(ctx context.Context, pvc *corev1.PersistentVolumeClaim, cause error, infeasible bool) error {
	code := status.Code(cause)
	if !finalExpansionError(cause) {
		return fmt.Errorf("Expander.NodeExpand failed to expand the volume : %w", cause) //nolint:staticcheck // the kubelet's message
	}
	failed := pvc.DeepCopy()
	if infeasible || code == codes.InvalidArgument || code == codes.OutOfRange || code == codes.NotFound {
		failed = withResizeStatus(failed, corev1.PersistentVolumeClaimNodeResizeInfeasible)
	}
	cond := corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimNodeResizeError, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(m.clock().Now()), Message: fmt.Sprintf("failed to expand pvc with %v", cause)}
	failed.Status.Conditions = append(withoutCondition(failed.Status.Conditions, cond.Type), cond)
	if err := m.ClaimStatus.PatchClaimStatus(ctx, pvc, failed); err != nil {
		return fmt.Errorf("MountVolume.NodeExpandVolume failed to mark node expansion as failed: %w", err)
	}
	return fmt.Errorf("Expander.NodeExpand failed to expand the volume : %w", cause) //nolint:staticcheck // the kubelet's message
}

// finalExpansionError says whether a failed NodeExpandVolume is over for good: not a driver refusing while the
// volume is in use (FailedPrecondition), not an error that leaves the operation possibly going on.
func finalExpansionError(err error) bool {
	return csi.IsFinal(err) && status.Code(err) != codes.FailedPrecondition
}

func withResizeStatus(pvc *corev1.PersistentVolumeClaim, s corev1.ClaimResourceStatus) *corev1.PersistentVolumeClaim {
	out := pvc.DeepCopy()
	if out.Status.AllocatedResourceStatuses == nil {
		out.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
	}
	out.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = s
	return out
}

func withoutResizeConditions(conds []corev1.PersistentVolumeClaimCondition) []corev1.PersistentVolumeClaimCondition {
	var out []corev1.PersistentVolumeClaimCondition
	for _, c := range conds {
		if !resizeConditions[c.Type] {
			out = append(out, c)
		}
	}
	return out
}

func withoutCondition(conds []corev1.PersistentVolumeClaimCondition, t corev1.PersistentVolumeClaimConditionType) []corev1.PersistentVolumeClaimCondition {
	var out []corev1.PersistentVolumeClaimCondition
	for _, c := range conds {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}
