package volumes

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/nodelet/nodelet/internal/atomicfile"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
)

// Directory names of the kubelet's CSI plugin: a pod's CSI volume is published at
// <pod>/volumes/kubernetes.io~csi/<spec name>/mount, a persistent one staged at
// <root>/plugins/kubernetes.io/csi/<driver>/<sha256 of the volume handle>/globalmount; each holds its
// vol_data.json beside it.
const (
	pluginCSI        = "kubernetes.io~csi"
	csiPluginName    = "kubernetes.io/csi"
	csiMountDir      = "mount"
	csiGlobalMount   = "globalmount"
	csiVolDataFile   = "vol_data.json"
	csiModePersisent = string(storagev1.VolumeLifecyclePersistent)
	csiModeEphemeral = string(storagev1.VolumeLifecycleEphemeral)
)

// CSIDrivers is the CSI drivers registered on this node, as the volume manager uses them
// (volumes/csi.Registry).
type CSIDrivers interface {
	// NodeClient is the node service of the registered driver name; an error when it is not registered.
	NodeClient(driver string) (CSINodeClient, error)
}

// CSINodeClient is the node service of one CSI driver (volumes/csi.Client).
type CSINodeClient interface {
	// NodeCapabilities lists the node service's capabilities (cached by the client).
	NodeCapabilities(ctx context.Context) (map[csipb.NodeServiceCapability_RPC_Type]bool, error)
	NodeStageVolume(ctx context.Context, req *csipb.NodeStageVolumeRequest) error
	NodeUnstageVolume(ctx context.Context, volumeID, stagingPath string) error
	NodePublishVolume(ctx context.Context, req *csipb.NodePublishVolumeRequest) error
	NodeUnpublishVolume(ctx context.Context, volumeID, targetPath string) error
	NodeGetVolumeStats(ctx context.Context, volumeID, volumePath string) (*csipb.NodeGetVolumeStatsResponse, error)
	NodeExpandVolume(ctx context.Context, req *csipb.NodeExpandVolumeRequest) error
}

// ClaimStatusWriter patches a claim's status (persistentvolumeclaims/status, which the Node authorizer's
// rules allow a node): node expansion writes its progress there. updated is left as the API server returned it.
type ClaimStatusWriter interface {
	PatchClaimStatus(ctx context.Context, old, updated *corev1.PersistentVolumeClaim) error
}

// CSIObjects reads what CSI volumes need from the API server: the CSIDriver (get, as the Node
// authorizer's rules allow every node) and the VolumeAttachment of a volume on this node.
type CSIObjects interface {
	GetCSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error)
	GetVolumeAttachment(ctx context.Context, name string) (*storagev1.VolumeAttachment, error)
}

// csiVolume is one CSI volume of a pod: a CSI PersistentVolume, or an inline (ephemeral) csi source.
type csiVolume struct {
	driver string
	handle string
	// specName names the pod's volume directory: the PersistentVolume's name, or the pod volume's.
	specName       string
	ephemeral      bool
	readOnly       bool
	fsType         string
	attributes     map[string]string
	mountOptions   []string
	accessMode     corev1.PersistentVolumeAccessMode
	block          bool
	publishSecrets *corev1.SecretReference
	stageSecrets   *corev1.SecretReference
}

// csiFromPersistent is the csiVolume of a claim whose PersistentVolume is a CSI one.
func csiFromPersistent(cv *claimedVolume) *csiVolume {
	src := cv.pv.Spec.CSI
	v := &csiVolume{driver: src.Driver, handle: src.VolumeHandle, specName: cv.pv.Name,
		readOnly: cv.readOnly || src.ReadOnly, fsType: src.FSType, attributes: src.VolumeAttributes,
		mountOptions: cv.pv.Spec.MountOptions, accessMode: corev1.ReadWriteOnce,
		publishSecrets: src.NodePublishSecretRef, stageSecrets: src.NodeStageSecretRef, block: cv.isBlock()}
	if len(cv.pv.Spec.AccessModes) > 0 {
		v.accessMode = cv.pv.Spec.AccessModes[0]
	}
	return v
}

// csiFromInline is the csiVolume of an inline csi source: an ephemeral volume whose handle is made
// from the pod's UID and the volume's name, as the kubelet makes it.
func csiFromInline(pod *corev1.Pod, vol *corev1.Volume) *csiVolume {
	src := vol.CSI
	v := &csiVolume{driver: src.Driver, handle: inlineVolumeHandle(pod, vol.Name), specName: vol.Name,
		ephemeral: true, readOnly: src.ReadOnly != nil && *src.ReadOnly, attributes: src.VolumeAttributes,
		accessMode: corev1.ReadWriteOnce}
	if src.FSType != nil {
		v.fsType = *src.FSType
	}
	if src.NodePublishSecretRef != nil {
		v.publishSecrets = &corev1.SecretReference{Namespace: pod.Namespace, Name: src.NodePublishSecretRef.Name}
	}
	return v
}

// inlineVolumeHandle is the kubelet's handle of an inline CSI volume: "csi-" + sha256(pod UID + volume name).
func inlineVolumeHandle(pod *corev1.Pod, name string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(string(pod.UID)+name)))
}

// UniqueCSIVolumeName is the volume's name in a Node's volumesInUse and volumesAttached:
// kubernetes.io/csi/<driver>^<volume handle>.
func UniqueCSIVolumeName(driver, handle string) corev1.UniqueVolumeName {
	return corev1.UniqueVolumeName(csiPluginName + "/" + driver + "^" + handle)
}

// attachmentName is the VolumeAttachment of a volume on a node: csi-<sha256(handle+driver+node)>.
func attachmentName(handle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+driver+node)))
}

// stagingPath is where a persistent CSI volume is staged on this node.
func (m csiVolumes) stagingPath(driver, handle string) (string, error) {
	if err := podrules.PathSegment("CSI driver name", driver); err != nil {
		return "", err
	}
	return filepath.Join(m.RootDir, "plugins", csiPluginName, driver,
		fmt.Sprintf("%x", sha256.Sum256([]byte(handle))), csiGlobalMount), nil
}

// csiDriverInfo is what a CSIDriver object says, with the API's defaults when there is none.
type csiDriverInfo struct {
	attachRequired bool
	podInfoOnMount bool
	fsGroupPolicy  storagev1.FSGroupPolicy
	modes          []storagev1.VolumeLifecycleMode
	tokenRequests  []storagev1.TokenRequest
	tokensInSecret bool
	republish      bool
}

// driverInfo reads the CSIDriver name; a driver without one attaches, has no pod info, the default
// fsGroup policy and persistent volumes only.
func (m csiVolumes) driverInfo(ctx context.Context, name string) (*csiDriverInfo, error) {
	info := &csiDriverInfo{attachRequired: true, fsGroupPolicy: storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy,
		modes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}}
	if m.CSIObjects == nil {
		return info, nil
	}
	d, err := m.CSIObjects.GetCSIDriver(ctx, name)
	if apierrors.IsNotFound(err) {
		return info, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read CSIDriver %s: %w", name, err)
	}
	s := d.Spec
	if s.AttachRequired != nil {
		info.attachRequired = *s.AttachRequired
	}
	info.podInfoOnMount = s.PodInfoOnMount != nil && *s.PodInfoOnMount
	if s.FSGroupPolicy != nil {
		info.fsGroupPolicy = *s.FSGroupPolicy
	}
	if len(s.VolumeLifecycleModes) > 0 {
		info.modes = s.VolumeLifecycleModes
	}
	info.tokenRequests = s.TokenRequests
	info.tokensInSecret = s.ServiceAccountTokenInSecrets != nil && *s.ServiceAccountTokenInSecrets
	info.republish = s.RequiresRepublish != nil && *s.RequiresRepublish
	return info, nil
}

// attachable says whether the volume goes through a VolumeAttachment (and so into volumesInUse):
// a persistent volume of a driver that requires attaching.
func (v *csiVolume) attachable(info *csiDriverInfo) bool { return !v.ephemeral && info.attachRequired }

// setUpCSI publishes a CSI volume into the pod (staging it first on this node when the driver stages),
// as the kubelet's CSI plugin: an attachable volume waits until it is reported in use and its
// VolumeAttachment is attached; a volume already published is left as it is (after a restart or a
// takeover it is adopted, not mounted again) unless the driver asks to be called again.
func (m csiVolumes) setUpCSI(ctx context.Context, pod *corev1.Pod, v *csiVolume, pv *podVolumes) error {
	info, err := m.csiv().driverInfo(ctx, v.driver)
	if err != nil {
		return err
	}
	if err := checkLifecycleMode(v, info); err != nil {
		return err
	}
	target, err := m.csiv().csiTargetPath(pod, v)
	if err != nil {
		return err
	}
	if v.attachable(info) {
		m.inUseChanged(m.inUse.add(pod.UID, UniqueCSIVolumeName(v.driver, v.handle)))
	}
	published, err := m.csiv().published(pod.UID, v, target)
	if err != nil {
		return err
	}
	if published && !info.republish {
		return nil
	}
	return m.csiv().publishForPod(ctx, pod, v, info, pv, target)
}

// publishForPod does the driver's part of setUpCSI: once attached, stage and publish (or map a block
// volume), then apply the pod's fsGroup where the kubelet would.
func (m csiVolumes) publishForPod(ctx context.Context, pod *corev1.Pod, v *csiVolume, info *csiDriverInfo, pv *podVolumes, target string) error {
	client, err := m.csiv().csiClient(v.driver)
	if err != nil {
		return err
	}
	var publishContext map[string]string
	if v.attachable(info) {
		if publishContext, err = m.csiv().waitAttached(ctx, v); err != nil {
			return err
		}
	}
	caps, err := client.NodeCapabilities(ctx)
	if err != nil {
		return fmt.Errorf("failed to read the node capabilities of CSI driver %s: %w", v.driver, err)
	}
	if v.block {
		return m.blockv().setUpCSIBlock(ctx, pod, v, info, publishContext, client, caps, pv)
	}
	if err := m.csiv().stageAndPublish(ctx, client, caps, pod, v, info, pv, target, publishContext); err != nil {
		return err
	}
	if caps[csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP] || v.readOnly || !supportsFSGroup(v, info, pod) {
		return nil
	}
	return applyFSGroup(target, pod)
}

// stageAndPublish stages a persistent volume (under its staging path's lock, so that the last pod's
// teardown cannot unstage it in between) and publishes it at target.
func (m csiVolumes) stageAndPublish(ctx context.Context, client CSINodeClient, caps map[csipb.NodeServiceCapability_RPC_Type]bool,
	pod *corev1.Pod, v *csiVolume, info *csiDriverInfo, pv *podVolumes, target string, publishContext map[string]string) error {
	staging := ""
	if !v.ephemeral {
		path, err := m.csiv().stagingPath(v.driver, v.handle)
		if err != nil {
			return err
		}
		defer m.stagingLocks.lock(path)()
		if staging, err = m.csiv().stageCSI(ctx, client, caps, v, pod, publishContext); err != nil {
			return err
		}
	}
	return m.csiv().publishCSI(ctx, client, caps, pod, v, info, pv, staging, target, publishContext)
}

// published says whether the volume is published for the pod already: its target mounted, or for a
// block volume its device mapped (the global map path mounted and the pod's link in place).
func (m csiVolumes) published(uid types.UID, v *csiVolume, target string) (bool, error) {
	if !v.block {
		return m.mounter().IsMountPoint(target)
	}
	p, err := m.blockv().csiBlockPaths(uid, v.specName)
	if err != nil {
		return false, err
	}
	if _, err := os.Lstat(p.podLink); err != nil {
		return false, nil //nolint:nilerr // no link: not mapped
	}
	return m.mounter().IsMountPoint(p.globalMap)
}

// checkLifecycleMode: the driver must support the volume's lifecycle mode (persistent or ephemeral).
func checkLifecycleMode(v *csiVolume, info *csiDriverInfo) error {
	want := storagev1.VolumeLifecyclePersistent
	if v.ephemeral {
		want = storagev1.VolumeLifecycleEphemeral
	}
	for _, m := range info.modes {
		if m == want {
			return nil
		}
	}
	return fmt.Errorf("volume mode %q not supported by driver %s (only supports %q)", want, v.driver, info.modes)
}

// supportsFSGroup is the kubelet's rule for whether it applies the pod's fsGroup to a CSI volume.
func supportsFSGroup(v *csiVolume, info *csiDriverInfo, pod *corev1.Pod) bool {
	if fsGroup(pod) == nil {
		return false
	}
	switch info.fsGroupPolicy {
	case storagev1.FileFSGroupPolicy:
		return true
	case storagev1.NoneFSGroupPolicy:
		return false
	}
	if v.fsType == "" {
		return false
	}
	return v.ephemeral || v.accessMode == corev1.ReadWriteOnce || v.accessMode == corev1.ReadWriteOncePod
}

// csiTargetPath is where the volume is published for the pod: <pod>/volumes/kubernetes.io~csi/<spec name>/mount.
func (m csiVolumes) csiTargetPath(pod *corev1.Pod, v *csiVolume) (string, error) {
	dir, err := m.volumeDir(pod.UID, pluginCSI, v.specName)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, csiMountDir), nil
}

func (m csiVolumes) csiClient(driver string) (CSINodeClient, error) {
	if m.CSI == nil {
		return nil, fmt.Errorf("driver name %s not found in the list of registered CSI drivers", driver)
	}
	return m.CSI.NodeClient(driver)
}

// waitAttached checks the volume's VolumeAttachment: attached, it gives the publish context; not yet,
// an error naming it (the pod waits and the next sync checks again).
func (m csiVolumes) waitAttached(ctx context.Context, v *csiVolume) (map[string]string, error) {
	name := UniqueCSIVolumeName(v.driver, v.handle)
	if !m.inUse.isReported(name) {
		return nil, fmt.Errorf("%w: Volume has not been added to the list of VolumesInUse in the node's volume status for volume %q ", errWaiting, v.specName)
	}
	if err := m.csiv().attachedPerNode(ctx, name, v.specName); err != nil {
		return nil, err
	}
	if m.CSIObjects == nil {
		return nil, fmt.Errorf("volume %s: no API server to read its VolumeAttachment from", v.handle)
	}
	id := attachmentName(v.handle, v.driver, m.NodeName)
	va, err := m.CSIObjects.GetVolumeAttachment(ctx, id)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: volume %v has GET error for volume attachment %v: %w", errWaiting, v.handle, id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("volume %v has GET error for volume attachment %v: %w", v.handle, id, err)
	}
	switch {
	case va.DeletionTimestamp != nil:
		return nil, errors.New("volume attachment is being deleted")
	case va.Status.Attached:
		return va.Status.AttachmentMetadata, nil
	case va.Status.AttachError != nil:
		return nil, errors.New(va.Status.AttachError.Message)
	}
	return nil, fmt.Errorf("%w: volume %v is not attached for volume attachment %v", errWaiting, v.handle, id)
}

// errWaiting marks a volume waiting for something that is on its way (the node's status, the attach/detach
// controller, the external attacher): not a failure, so no FailedMount event; the pod waits and the
// next sync looks again.
var errWaiting = errors.New("waiting")

// attachedPerNode: the node's status.volumesAttached (written by the attach/detach controller) must list
// the volume, as the kubelet checks before it mounts a controller-attached volume.
func (m csiVolumes) attachedPerNode(ctx context.Context, name corev1.UniqueVolumeName, specName string) error {
	if m.AttachedVolumes == nil {
		return nil
	}
	attached, err := m.AttachedVolumes(ctx)
	if err != nil {
		return fmt.Errorf("VerifyControllerAttachedVolume failed fetching node from API server for volume %q : %w", specName, err)
	}
	for _, a := range attached {
		if a.Name == name {
			return nil
		}
	}
	return fmt.Errorf("%w: Volume not attached according to node status for volume %q ", errWaiting, specName)
}

// stageCSI stages a persistent volume on this node once (the driver's NodeStageVolume is idempotent)
// and writes the staging vol_data.json, kept even when the driver does not stage: unstaging reads it.
func (m csiVolumes) stageCSI(ctx context.Context, client CSINodeClient, caps map[csipb.NodeServiceCapability_RPC_Type]bool,
	v *csiVolume, pod *corev1.Pod, publishContext map[string]string) (string, error) {
	staging, err := m.csiv().stagingPath(v.driver, v.handle)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return "", err
	}
	if err := saveVolData(filepath.Dir(staging), map[string]string{"volumeHandle": v.handle, "driverName": v.driver}); err != nil {
		return "", err
	}
	if !caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		return "", nil
	}
	if m.staged.has(staging) {
		return staging, nil
	}
	secrets, err := m.csiv().csiSecrets(ctx, v.stageSecrets)
	if err != nil {
		return "", err
	}
	req := &csipb.NodeStageVolumeRequest{VolumeId: v.handle, PublishContext: publishContext, StagingTargetPath: staging,
		VolumeCapability: v.capability(caps, pod), Secrets: secrets, VolumeContext: v.attributes}
	start := m.clock().Now()
	err = client.NodeStageVolume(ctx, req)
	m.observeOp(csiQualifiedPluginName(v.driver), opMountDevice, start, err)
	if err != nil {
		return "", &opError{op: "MountVolume.MountDevice", volume: v.specName, err: err}
	}
	m.staged.add(staging)
	return staging, nil
}

// publishCSI publishes the volume at target with the pod's information where the driver asks for it.
func (m csiVolumes) publishCSI(ctx context.Context, client CSINodeClient, caps map[csipb.NodeServiceCapability_RPC_Type]bool,
	pod *corev1.Pod, v *csiVolume, info *csiDriverInfo, pv *podVolumes, staging, target string, publishContext map[string]string) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return err
	}
	if err := saveVolData(filepath.Dir(target), v.volData(m.NodeName)); err != nil {
		return err
	}
	secrets, attrs, err := m.csiv().publishSecretsAndContext(ctx, pod, v, info)
	if err != nil {
		return err
	}
	tokens, err := m.csiv().csiTokens(ctx, pod, info, pv)
	if err != nil {
		return err
	}
	if info.tokensInSecret {
		secrets = mergeMaps(secrets, tokens)
	} else {
		attrs = mergeMaps(attrs, tokens)
	}
	req := &csipb.NodePublishVolumeRequest{VolumeId: v.handle, PublishContext: publishContext, StagingTargetPath: staging,
		TargetPath: target, VolumeCapability: v.capability(caps, pod), Readonly: v.readOnly, Secrets: secrets,
		VolumeContext: attrs}
	if err := client.NodePublishVolume(ctx, req); err != nil {
		return err
	}
	return nil
}

// capability is the volume's CSI capability: a mount with its fsType and mount options (and the pod's
// fsGroup for a driver that applies it), with the access mode mapped as the kubelet maps it.
func (v *csiVolume) capability(caps map[csipb.NodeServiceCapability_RPC_Type]bool, pod *corev1.Pod) *csipb.VolumeCapability {
	mount := &csipb.VolumeCapability_MountVolume{FsType: v.fsType, MountFlags: v.mountOptions}
	if g := fsGroup(pod); g != nil && caps[csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP] {
		mount.VolumeMountGroup = strconv.FormatInt(*g, 10)
	}
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: mount},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csiAccessMode(v.accessMode, caps)},
	}
}

// csiAccessMode maps a PersistentVolume access mode to CSI's, as the kubelet does (the single-node
// multi-writer modes when the driver has that capability).
func csiAccessMode(mode corev1.PersistentVolumeAccessMode, caps map[csipb.NodeServiceCapability_RPC_Type]bool) csipb.VolumeCapability_AccessMode_Mode {
	multi := caps[csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER]
	switch mode {
	case corev1.ReadWriteOnce:
		if multi {
			return csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		}
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case corev1.ReadWriteOncePod:
		if multi {
			return csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		}
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case corev1.ReadOnlyMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case corev1.ReadWriteMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	}
	return csipb.VolumeCapability_AccessMode_UNKNOWN
}

// volData is what vol_data.json records of a volume published for a pod on node, read back after a restart
// that lost the pod: the handle and driver to unpublish it with, and whether it is an inline ephemeral volume.
func (v *csiVolume) volData(node string) map[string]string {
	mode := csiModePersisent
	if v.ephemeral {
		mode = csiModeEphemeral
	}
	return map[string]string{
		"specVolID": v.specName, "volumeHandle": v.handle, "driverName": v.driver, "nodeName": node,
		"volumeLifecycleMode": mode, "attachmentID": attachmentName(v.handle, v.driver, node),
	}
}

// publishSecretsAndContext are the secrets and volume context of a NodePublishVolume, filesystem or block: the
// volume's publish secrets and attributes, with the pod's information where the driver asks for it.
func (m csiVolumes) publishSecretsAndContext(ctx context.Context, pod *corev1.Pod, v *csiVolume, info *csiDriverInfo) (secrets, attrs map[string]string, err error) {
	secrets, err = m.csiSecrets(ctx, v.publishSecrets)
	if err != nil {
		return nil, nil, err
	}
	attrs = v.attributes
	if info.podInfoOnMount {
		attrs = mergeMaps(attrs, podInfoAttributes(pod, v.ephemeral))
	}
	return secrets, attrs, nil
}

// podInfoAttributes is the pod information a driver with podInfoOnMount gets in the volume context.
func podInfoAttributes(pod *corev1.Pod, ephemeral bool) map[string]string {
	return map[string]string{
		"csi.storage.k8s.io/pod.name":            pod.Name,
		"csi.storage.k8s.io/pod.namespace":       pod.Namespace,
		"csi.storage.k8s.io/pod.uid":             string(pod.UID),
		"csi.storage.k8s.io/serviceAccount.name": pod.Spec.ServiceAccountName,
		"csi.storage.k8s.io/ephemeral":           strconv.FormatBool(ephemeral),
	}
}

// csiSecrets reads a secret a driver needs for a call, as a string map; none without a reference.
func (m csiVolumes) csiSecrets(ctx context.Context, ref *corev1.SecretReference) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	s, err := m.Objects.GetSecret(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("fetching secret %s/%s failed: %w", ref.Namespace, ref.Name, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// csiTokens requests the service account tokens a driver's tokenRequests name, bound to the pod, and
// gives them as the kubelet does: one attribute csi.storage.k8s.io/serviceAccount.tokens holding a JSON
// object of audience → {token, expirationTimestamp}.
func (m csiVolumes) csiTokens(ctx context.Context, pod *corev1.Pod, info *csiDriverInfo, pv *podVolumes) (map[string]string, error) {
	if len(info.tokenRequests) == 0 {
		return nil, nil
	}
	type token struct {
		Token               string `json:"token"`
		ExpirationTimestamp string `json:"expirationTimestamp"`
	}
	out := map[string]token{}
	for _, tr := range info.tokenRequests {
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			Audiences: []string{tr.Audience}, ExpirationSeconds: tr.ExpirationSeconds,
			BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
		}}
		if tr.Audience == "" {
			req.Spec.Audiences = nil
		}
		got, err := m.srcv().token(ctx, pod.Namespace, serviceAccountName(pod), req, pv)
		if err != nil {
			return nil, fmt.Errorf("failed to get a token for audience %q: %w", tr.Audience, err)
		}
		out[tr.Audience] = token{Token: got.Status.Token, ExpirationTimestamp: got.Status.ExpirationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return map[string]string{"csi.storage.k8s.io/serviceAccount.tokens": string(b)}, nil
}

func mergeMaps(a, b map[string]string) map[string]string {
	if len(b) == 0 {
		return a
	}
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// saveVolData writes dir/vol_data.json atomically.
func saveVolData(dir string, data map[string]string) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, csiVolDataFile), b, 0o640); err != nil {
		return fmt.Errorf("failed to save volume info data: %w", err)
	}
	return nil
}

// loadVolData reads dir/vol_data.json.
func loadVolData(dir string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, csiVolDataFile))
	if err != nil {
		return nil, err
	}
	var data map[string]string
	if err := json.Unmarshal(b, &data); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, csiVolDataFile), err)
	}
	return data, nil
}
