package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/storage/ephemeral"

	"github.com/nodelet/nodelet/podrules"
)

// Plugin directory of local persistent volumes under <pod>/volumes, as the kubelet escapes it.
const pluginLocalVolume = "kubernetes.io~local-volume"

// claimedVolume is a pod's persistentVolumeClaim volume resolved to the PersistentVolume bound to it.
type claimedVolume struct {
	pvc *corev1.PersistentVolumeClaim
	pv  *corev1.PersistentVolume
	// readOnly is the pod's persistentVolumeClaim.readOnly: the volume is set up and mounted read-only.
	readOnly bool
	// expansionFailedFinal: the last node expansion failed for good (kept while the pod has the volume).
	expansionFailedFinal bool
}

// ClaimError is a pod volume whose claim cannot be used yet (not found, not bound, being deleted, bound
// to a volume that does not point back at it, or of the wrong volume mode). The pod waits for it; its
// message is the kubelet's FailedMount event for a volume it failed to process.
type ClaimError struct {
	Volume string
	Err    error
}

// Error reads as the kubelet's "Unable to attach or mount volumes" message for this volume.
func (e *ClaimError) Error() string {
	return fmt.Sprintf("Unable to attach or mount volumes: unmounted volumes=[%s], unattached volumes=[], "+
		"failed to process volumes=[%s]: %v", e.Volume, e.Volume, e.Err)
}

// Unwrap returns the cause.
func (e *ClaimError) Unwrap() error { return e.Err }

// resolveClaim reads the pod's claim and the volume bound to it, with the kubelet's checks and
// messages: the claim must exist, not be being deleted, be Bound to a named volume; the volume must
// exist and be bound back to this claim (by UID); its volumeMode must match how containers use it.
func (m claimVolumes) resolveClaim(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume) (*claimedVolume, error) {
	src := claimSource(pod, vol)
	pvc, err := m.claimv().boundClaim(ctx, pod.Namespace, src.ClaimName)
	if err != nil {
		return nil, fmt.Errorf("error processing PVC %s/%s: %w", pod.Namespace, src.ClaimName, err)
	}
	if vol.Ephemeral != nil {
		if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
			return nil, err
		}
	}
	pv, err := m.claimv().boundVolume(ctx, pvc.Spec.VolumeName, pvc.UID)
	if err != nil {
		return nil, fmt.Errorf("error processing PVC %s/%s: %w", pod.Namespace, src.ClaimName, err)
	}
	if err := checkVolumeMode(pod, vol.Name, pv); err != nil {
		return nil, err
	}
	return &claimedVolume{pvc: pvc, pv: pv, readOnly: src.ReadOnly}, nil
}

// claimSource is the claim of a persistentVolumeClaim volume, or of a generic ephemeral volume: the claim
// <pod>-<volume> the ephemeral volume controller makes for the pod (never read-only).
func claimSource(pod *corev1.Pod, vol *corev1.Volume) *corev1.PersistentVolumeClaimVolumeSource {
	if vol.PersistentVolumeClaim != nil {
		return vol.PersistentVolumeClaim
	}
	return &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ephemeral.VolumeClaimName(pod, vol)}
}

// boundClaim is the claim if it can be used: found, not being deleted, Bound to a named volume.
func (m claimVolumes) boundClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := m.Objects.GetPersistentVolumeClaim(ctx, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("failed to fetch PVC from API server: %w", err)
	}
	switch {
	case pvc.DeletionTimestamp != nil:
		return nil, errors.New("PVC is being deleted")
	case pvc.Status.Phase != corev1.ClaimBound:
		return nil, errors.New("PVC is not bound")
	case pvc.Spec.VolumeName == "":
		return nil, errors.New("PVC has empty pvc.Spec.VolumeName")
	}
	return pvc, nil
}

// boundVolume is the PersistentVolume name if it is bound to the claim claimUID.
func (m claimVolumes) boundVolume(ctx context.Context, name string, claimUID types.UID) (*corev1.PersistentVolume, error) {
	pv, err := m.Objects.GetPersistentVolume(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("failed to fetch PV %s from API server: %w", name, err)
	}
	if pv.Spec.ClaimRef == nil {
		return nil, fmt.Errorf("found PV object %s but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim", name)
	}
	if pv.Spec.ClaimRef.UID != claimUID {
		return nil, fmt.Errorf("found PV object %s but its pv.Spec.ClaimRef.UID %s does not point to claim.UID %s",
			name, pv.Spec.ClaimRef.UID, claimUID)
	}
	return pv, nil
}

// checkVolumeMode: a Block volume cannot be in volumeMounts, a Filesystem one cannot be in volumeDevices.
func checkVolumeMode(pod *corev1.Pod, name string, pv *corev1.PersistentVolume) error {
	mode := volumeMode(pv)
	mounted, devices := volumeUses(pod, name)
	if mounted && mode != corev1.PersistentVolumeFilesystem {
		return fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeMounts", name, mode)
	}
	if devices && mode != corev1.PersistentVolumeBlock {
		return fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeDevices", name, mode)
	}
	return nil
}

// volumeMode is the volume's mode, Filesystem when unset.
func volumeMode(pv *corev1.PersistentVolume) corev1.PersistentVolumeMode {
	if pv.Spec.VolumeMode == nil {
		return corev1.PersistentVolumeFilesystem
	}
	return *pv.Spec.VolumeMode
}

// volumeUses says whether any container of the pod (init, regular, ephemeral) mounts the volume, and
// whether any uses it as a block device.
func volumeUses(pod *corev1.Pod, name string) (mounted, devices bool) {
	check := func(mounts []corev1.VolumeMount, devs []corev1.VolumeDevice) {
		for _, vm := range mounts {
			mounted = mounted || vm.Name == name
		}
		for _, d := range devs {
			devices = devices || d.Name == name
		}
	}
	for _, c := range pod.Spec.InitContainers {
		check(c.VolumeMounts, c.VolumeDevices)
	}
	for _, c := range pod.Spec.Containers {
		check(c.VolumeMounts, c.VolumeDevices)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		check(c.VolumeMounts, c.VolumeDevices)
	}
	return mounted, devices
}

// setUpClaim resolves the pod's claim (of a persistentVolumeClaim or generic ephemeral volume) (once: a volume set up stays with the claim it was set up for)
// and sets up the volume bound to it.
func (m claimVolumes) setUpClaim(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, pv *podVolumes) error {
	cv := pv.claims[vol.Name]
	if cv != nil {
		m.claimv().expandInUse(ctx, pod, cv)
	} else {
		var err error
		if cv, err = m.claimv().resolveClaim(ctx, pod, vol); err != nil {
			return &ClaimError{Volume: vol.Name, Err: err}
		}
		if err := m.claimv().checkReadWriteOncePod(pod.UID, cv); err != nil {
			return &VolumeError{Volume: cv.pv.Name, Err: err}
		}
	}
	if err := m.claimv().setUpPersistent(ctx, pod, cv, pv); err != nil {
		if errors.Is(err, errWaiting) {
			return err
		}
		return &VolumeError{Volume: cv.pv.Name, Err: err} // the kubelet names a claim's volume by its PersistentVolume
	}
	pv.claims[vol.Name] = cv
	return nil
}

// setUpPersistent sets up a PersistentVolume's source for the pod, by plugin.
func (m claimVolumes) setUpPersistent(ctx context.Context, pod *corev1.Pod, cv *claimedVolume, pv *podVolumes) error {
	src := &cv.pv.Spec.PersistentVolumeSource
	switch {
	case src.HostPath != nil:
		return checkHostPath(src.HostPath)
	case src.Local != nil && cv.isBlock():
		return m.blockv().setUpLocalBlock(pod, cv)
	case src.Local != nil:
		return m.claimv().setUpLocal(pod, cv)
	case src.CSI != nil:
		return m.csiv().setUpCSI(ctx, pod, csiFromPersistent(cv), pv)
	default:
		return fmt.Errorf("%w: PersistentVolume %s of type %q", ErrUnsupportedVolume, cv.pv.Name, persistentSourceKind(src))
	}
}

// errInUseReadWriteOncePod is the kubelet's refusal to mount a ReadWriteOncePod volume a second time.
var errInUseReadWriteOncePod = errors.New("volume uses the ReadWriteOncePod access mode and is already in use by another pod")

// checkReadWriteOncePod enforces the ReadWriteOncePod access mode on the node, as the kubelet does before it
// mounts or maps a volume (the scheduler enforces it too, but a pod may be bound to the node directly): a
// volume whose only access mode is ReadWriteOncePod is not set up for a pod while another pod on the node has it
// set up. A volume listing more modes is not checked: which one the pod means is not known.
func (m claimVolumes) checkReadWriteOncePod(uid types.UID, cv *claimedVolume) error {
	if modes := cv.pv.Spec.AccessModes; len(modes) != 1 || modes[0] != corev1.ReadWriteOncePod {
		return nil
	}
	m.mu.Lock()
	others := make([]*podVolumes, 0, len(m.pods))
	for other, pv := range m.pods {
		if other != uid {
			others = append(others, pv)
		}
	}
	m.mu.Unlock()
	for _, pv := range others {
		for _, set := range pv.claimsSnapshot() {
			if set.pv.Name == cv.pv.Name {
				if cv.isBlock() {
					return &opError{op: "MapVolume.SetUpDevice", volume: cv.pv.Name, err: errInUseReadWriteOncePod}
				}
				return errInUseReadWriteOncePod
			}
		}
	}
	return nil
}

// persistentPath is where a set-up PersistentVolume is on the host, for containers to mount.
func (m claimVolumes) persistentPath(uid types.UID, cv *claimedVolume) (string, error) {
	src := &cv.pv.Spec.PersistentVolumeSource
	switch {
	case src.HostPath != nil:
		return src.HostPath.Path, nil
	case src.Local != nil:
		return m.volumeDir(uid, pluginLocalVolume, cv.pv.Name)
	case src.CSI != nil:
		dir, err := m.volumeDir(uid, pluginCSI, cv.pv.Name)
		return filepath.Join(dir, csiMountDir), err
	default:
		return "", fmt.Errorf("%w: PersistentVolume %s of type %q", ErrUnsupportedVolume, cv.pv.Name, persistentSourceKind(src))
	}
}

// setUpLocal bind-mounts a local volume's directory at <pod>/volumes/kubernetes.io~local-volume/<pv>
// (read-only for a read-only claim) and, the first time, gives it the pod's fsGroup, as the kubelet's
// local plugin does.
func (m claimVolumes) setUpLocal(pod *corev1.Pod, cv *claimedVolume) error {
	local := cv.pv.Spec.Local
	if local.Path == "" {
		return fmt.Errorf("LocalVolume volume %q path is empty", cv.pv.Name)
	}
	if slices.Contains(strings.Split(local.Path, "/"), "..") {
		return fmt.Errorf("invalid path: %s must not contain '..'", local.Path)
	}
	info, err := os.Stat(local.Path)
	if err != nil {
		return fmt.Errorf("local volume %s: %w", cv.pv.Name, err)
	}
	source := local.Path
	switch mode := info.Mode(); {
	case mode.IsDir():
	case mode&os.ModeDevice != 0 && mode&os.ModeCharDevice == 0:
		if source, err = m.claimv().mountLocalDevice(cv); err != nil {
			return err
		}
	default:
		return errors.New("only directory and block device are supported")
	}
	dir, err := m.volumeDir(pod.UID, pluginLocalVolume, cv.pv.Name)
	if err != nil {
		return err
	}
	mounted, err := m.mounter().IsMountPoint(dir)
	if err != nil || mounted {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := m.mounter().BindMount(source, dir, cv.readOnly); err != nil {
		_ = os.Remove(dir)
		return fmt.Errorf("local: failed to bind-mount %s at %s: %w", source, dir, err)
	}
	if cv.readOnly {
		return nil
	}
	return applyFSGroup(dir, pod)
}

// localDeviceMountPath is where a local volume on a block device is mounted for the node's pods (the
// kubelet's local plugin's device mount path).
func (m claimVolumes) localDeviceMountPath(pvName string) (string, error) {
	if err := podrules.PathSegment("volume name", pvName); err != nil {
		return "", err
	}
	return filepath.Join(m.RootDir, "plugins", "kubernetes.io", "local-volume", "mounts", pvName), nil
}

// mountLocalDevice mounts a local volume's block device at its device mount path (once per node), making
// its filesystem (fsType, ext4 by default) when it has none, as the kubelet's local plugin; pods bind-mount
// that directory.
func (m claimVolumes) mountLocalDevice(cv *claimedVolume) (string, error) {
	target, err := m.claimv().localDeviceMountPath(cv.pv.Name)
	if err != nil {
		return "", err
	}
	defer m.stagingLocks.lock(target)()
	mounted, err := m.mounter().IsMountPoint(target)
	if err != nil || mounted {
		return target, err
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return "", err
	}
	fsType := "ext4"
	if t := cv.pv.Spec.Local.FSType; t != nil && *t != "" {
		fsType = *t
	}
	if err := m.mounter().FormatAndMount(cv.pv.Spec.Local.Path, target, fsType, cv.pv.Spec.MountOptions); err != nil {
		return "", fmt.Errorf("local: failed to mount device %s at %s (fstype: %s), error %w", cv.pv.Spec.Local.Path, target, fsType, err)
	}
	return target, nil
}

// unmountLocalDevices unmounts the local volumes' device mounts no pod directory binds any more.
func (m claimVolumes) unmountLocalDevices() error {
	mounts, err := filepath.Glob(filepath.Join(m.RootDir, "plugins", "kubernetes.io", "local-volume", "mounts", "*"))
	if err != nil {
		return err
	}
	for _, target := range mounts {
		if err := m.claimv().unmountLocalDevice(target); err != nil {
			return err
		}
	}
	return nil
}

func (m claimVolumes) unmountLocalDevice(target string) error {
	defer m.stagingLocks.lock(target)()
	users, err := filepath.Glob(filepath.Join(m.RootDir, "pods", "*", "volumes", pluginLocalVolume, filepath.Base(target)))
	if err != nil || len(users) > 0 {
		return err
	}
	mounted, err := m.mounter().IsMountPoint(target)
	if err != nil {
		return err
	}
	if mounted {
		if err := m.mounter().Unmount(target); err != nil {
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return os.Remove(target)
}

// persistentSourceKind is the JSON name of a PersistentVolume's source ("csi", "nfs", ...).
func persistentSourceKind(src *corev1.PersistentVolumeSource) string {
	return jsonFieldSet(src)
}
