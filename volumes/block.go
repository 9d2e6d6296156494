package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
)

// Block volumes (volumeMode: Block, used by volumeDevices) with the kubelet's layout: a CSI volume is
// staged at <root>/plugins/kubernetes.io/csi/volumeDevices/staging/<pv> and published for each pod as a
// device file at .../volumeDevices/publish/<pv>/<pod uid>, which is bind-mounted at
// .../volumeDevices/<pv>/dev/<pod uid> (the global map path, holding a reference while the pod runs) and
// linked from <pod>/volumeDevices/kubernetes.io~csi/<pv>: containers get that link as their device. The
// volume's vol_data.json is in .../volumeDevices/<pv>/data. A local block volume is linked from
// <pod>/volumeDevices/kubernetes.io~local-volume/<pv> to its device.
const (
	volumeDevicesDir = "volumeDevices"
	blockDataDir     = "data"
	blockDevDir      = "dev"
)

// isBlock says whether the claimed volume is a raw block device.
func (cv *claimedVolume) isBlock() bool { return volumeMode(cv.pv) == corev1.PersistentVolumeBlock }

// csiBlockDir is <root>/plugins/kubernetes.io/csi/volumeDevices.
func (m blockVolumes) csiBlockDir() string {
	return filepath.Join(m.RootDir, "plugins", csiPluginName, volumeDevicesDir)
}

// blockPaths are the kubelet's paths of one CSI block volume for one pod.
type blockPaths struct {
	data, staging, publishDir, publish, globalMap, podLink string
}

func (m blockVolumes) csiBlockPaths(uid types.UID, specName string) (blockPaths, error) {
	podDir, err := m.podDir(uid)
	if err != nil {
		return blockPaths{}, err
	}
	if err := podrules.PathSegment("volume name", specName); err != nil {
		return blockPaths{}, err
	}
	base := m.blockv().csiBlockDir()
	return blockPaths{
		data:       filepath.Join(base, specName, blockDataDir),
		staging:    filepath.Join(base, "staging", specName),
		publishDir: filepath.Join(base, "publish", specName),
		publish:    filepath.Join(base, "publish", specName, string(uid)),
		globalMap:  filepath.Join(base, specName, blockDevDir, string(uid)),
		podLink:    filepath.Join(podDir, volumeDevicesDir, pluginCSI, specName),
	}, nil
}

// setUpCSIBlock stages (once per node) and publishes a CSI block volume for the pod and maps it.
func (m blockVolumes) setUpCSIBlock(ctx context.Context, pod *corev1.Pod, v *csiVolume, info *csiDriverInfo, publishContext map[string]string,
	client CSINodeClient, caps map[csipb.NodeServiceCapability_RPC_Type]bool, pv *podVolumes) error {
	p, err := m.blockv().csiBlockPaths(pod.UID, v.specName)
	if err != nil {
		return err
	}
	defer m.stagingLocks.lock(p.staging)()
	if err := os.MkdirAll(p.data, 0o750); err != nil {
		return err
	}
	if err := saveVolData(p.data, v.volData(m.NodeName)); err != nil {
		return err
	}
	staging := ""
	if caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		staging = p.staging
		if !m.staged.has(staging) {
			if err := m.blockv().stageBlock(ctx, client, caps, v, staging, publishContext); err != nil {
				return err
			}
		}
	}
	if err := os.MkdirAll(p.publishDir, 0o750); err != nil {
		return err
	}
	secrets, attrs, err := m.csiv().publishSecretsAndContext(ctx, pod, v, info)
	if err != nil {
		return err
	}
	req := &csipb.NodePublishVolumeRequest{VolumeId: v.handle, PublishContext: publishContext, StagingTargetPath: staging,
		TargetPath: p.publish, VolumeCapability: v.blockCapability(caps), Readonly: v.readOnly, Secrets: secrets, VolumeContext: attrs}
	if err := client.NodePublishVolume(ctx, req); err != nil {
		return &opError{op: "MapVolume.SetUpDevice", volume: v.specName, err: err}
	}
	return m.blockv().mapBlock(p.publish, p.globalMap, p.podLink)
}

func (m blockVolumes) stageBlock(ctx context.Context, client CSINodeClient, caps map[csipb.NodeServiceCapability_RPC_Type]bool,
	v *csiVolume, staging string, publishContext map[string]string) error {
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return err
	}
	secrets, err := m.csiv().csiSecrets(ctx, v.stageSecrets)
	if err != nil {
		return err
	}
	req := &csipb.NodeStageVolumeRequest{VolumeId: v.handle, PublishContext: publishContext, StagingTargetPath: staging,
		VolumeCapability: v.blockCapability(caps), Secrets: secrets, VolumeContext: v.attributes}
	if err := client.NodeStageVolume(ctx, req); err != nil {
		return &opError{op: "MapVolume.SetUpDevice", volume: v.specName, err: err}
	}
	m.staged.add(staging)
	return nil
}

// blockCapability is the volume's CSI capability as a raw block device.
func (v *csiVolume) blockCapability(caps map[csipb.NodeServiceCapability_RPC_Type]bool) *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csiAccessMode(v.accessMode, caps)},
	}
}

// mapBlock bind-mounts the published device file at the global map path (once), holds it open with a loop
// device, and links the pod's device map path to it.
func (m blockVolumes) mapBlock(device, globalMap, podLink string) error {
	if err := os.MkdirAll(filepath.Dir(globalMap), 0o750); err != nil {
		return err
	}
	mounted, err := m.mounter().IsMountPoint(globalMap)
	if err != nil {
		return err
	}
	if !mounted {
		if err := touch(globalMap); err != nil {
			return err
		}
		if err := m.mounter().BindMount(device, globalMap, false); err != nil {
			return fmt.Errorf("failed to bind-mount %s at %s: %w", device, globalMap, err)
		}
	}
	if err := m.mounter().AttachFileDevice(globalMap); err != nil {
		return fmt.Errorf("failed to attach a loop device to %s: %w", globalMap, err)
	}
	return linkDevice(device, podLink)
}

// linkDevice makes link a symlink to device (replacing a stale one).
func linkDevice(device, link string) error {
	if err := os.MkdirAll(filepath.Dir(link), 0o750); err != nil {
		return err
	}
	if cur, err := os.Readlink(link); err == nil && cur == device {
		return nil
	}
	if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.Symlink(device, link)
}

func touch(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}

// setUpLocalBlock maps a local volume's block device for the pod as the kubelet's local plugin does: bound
// at its global map path <root>/plugins/kubernetes.io~local-volume/volumeDevices/<pv>/<pod uid> (held open
// there by a loop device) and linked from the pod's device map path.
func (m blockVolumes) setUpLocalBlock(pod *corev1.Pod, cv *claimedVolume) error {
	info, err := os.Stat(cv.pv.Spec.Local.Path)
	if err != nil {
		return fmt.Errorf("local volume %s: %w", cv.pv.Name, err)
	}
	if info.Mode()&os.ModeDevice == 0 || info.Mode()&os.ModeCharDevice != 0 {
		return fmt.Errorf("local volume %s: %s is not a block device", cv.pv.Name, cv.pv.Spec.Local.Path)
	}
	link, err := m.blockv().blockLink(pod.UID, cv)
	if err != nil {
		return err
	}
	return m.blockv().mapBlock(cv.pv.Spec.Local.Path, m.blockv().localBlockGlobalMap(cv.pv.Name, pod.UID), link)
}

// unmapGlobal releases a pod's global map path of a block volume, as the kubelet's UnmapBlockVolume: the loop
// device holding it open, then its bind mount, then the file.
func (m blockVolumes) unmapGlobal(volume, globalMap string) error {
	if err := m.mounter().DetachFileDevice(globalMap); err != nil {
		return fmt.Errorf("UnmapVolume.UnmapBlockVolume failed for volume %q : %w", volume, err)
	}
	if mounted, err := m.mounter().IsMountPoint(globalMap); err != nil {
		return err
	} else if mounted {
		if err := m.mounter().Unmount(globalMap); err != nil {
			return fmt.Errorf("unmount %s: %w", globalMap, err)
		}
	}
	if err := os.Remove(globalMap); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// localBlockGlobalMap is the kubelet's global map path of a local block volume for one pod (pv is a checked
// path segment).
func (m blockVolumes) localBlockGlobalMap(pv string, uid types.UID) string {
	return filepath.Join(m.RootDir, "plugins", pluginLocalVolume, volumeDevicesDir, pv, string(uid))
}

// unmapLocalBlock releases the pod's global map path of a local block volume: its loop device, its bind
// mount, the file, and the volume's folder once no pod maps it.
func (m blockVolumes) unmapLocalBlock(uid types.UID, pv string) error {
	if err := podrules.PathSegment("volume name", pv); err != nil {
		return err
	}
	globalMap := m.blockv().localBlockGlobalMap(pv, uid)
	if err := m.blockv().unmapGlobal(pv, globalMap); err != nil {
		return err
	}
	if err := os.Remove(filepath.Dir(globalMap)); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) {
		return err
	}
	return nil
}

// blockLink is the pod's device map path of a claimed block volume: what containers get as the device.
func (m blockVolumes) blockLink(uid types.UID, cv *claimedVolume) (string, error) {
	podDir, err := m.podDir(uid)
	if err != nil {
		return "", err
	}
	if err := podrules.PathSegment("volume name", cv.pv.Name); err != nil {
		return "", err
	}
	plugin := pluginCSI
	if cv.pv.Spec.Local != nil {
		plugin = pluginLocalVolume
	}
	return filepath.Join(podDir, volumeDevicesDir, plugin, cv.pv.Name), nil
}

// Devices returns the CRI devices of a container's volumeDevices, as the kubelet's makeBlockVolumes:
// the pod's device map path of each claimed block volume at the device path asked for, read-only for
// a read-only claim. Call it after SetUp made the pod's volumes ready.
func (m *Manager) Devices(pod *corev1.Pod, c *corev1.Container) ([]*runtimeapi.Device, error) {
	if len(c.VolumeDevices) == 0 {
		return nil, nil
	}
	pv := m.state(pod.UID, false)
	if pv == nil {
		return nil, fmt.Errorf("volumes of pod %s/%s are not set up", pod.Namespace, pod.Name)
	}
	pv.mu.Lock()
	defer pv.mu.Unlock()
	out := make([]*runtimeapi.Device, 0, len(c.VolumeDevices))
	for _, d := range c.VolumeDevices {
		cv := pv.claims[d.Name]
		if cv == nil || !cv.isBlock() {
			return nil, fmt.Errorf("cannot find block volume %q for container %q", d.Name, c.Name)
		}
		link, err := m.blockv().blockLink(pod.UID, cv)
		if err != nil {
			return nil, err
		}
		perm := "mrw"
		if cv.readOnly {
			perm = "r"
		}
		out = append(out, &runtimeapi.Device{ContainerPath: d.DevicePath, HostPath: link, Permissions: perm})
	}
	return out, nil
}

// tearDownBlock unmaps, unpublishes and (for the last pod on the node) unstages the pod's CSI block
// volumes, found from the links in <pod>/volumeDevices/kubernetes.io~csi, and unmaps its local block
// volumes (<pod>/volumeDevices/kubernetes.io~local-volume); then the links go.
func (m blockVolumes) tearDownBlock(ctx context.Context, uid types.UID, podDir string) error {
	links, err := filepath.Glob(filepath.Join(podDir, volumeDevicesDir, pluginCSI, "*"))
	if err != nil {
		return err
	}
	for _, link := range links {
		if err := m.blockv().tearDownCSIBlock(ctx, uid, filepath.Base(link)); err != nil {
			return err
		}
	}
	local, err := filepath.Glob(filepath.Join(podDir, volumeDevicesDir, pluginLocalVolume, "*"))
	if err != nil {
		return err
	}
	for _, link := range local {
		if err := m.blockv().unmapLocalBlock(uid, filepath.Base(link)); err != nil {
			return err
		}
	}
	return os.RemoveAll(filepath.Join(podDir, volumeDevicesDir))
}

func (m blockVolumes) tearDownCSIBlock(ctx context.Context, uid types.UID, specName string) error {
	p, err := m.blockv().csiBlockPaths(uid, specName)
	if err != nil {
		return err
	}
	data, err := loadVolData(p.data)
	if err != nil {
		return fmt.Errorf("block volume %s of pod %s: %w", specName, uid, err)
	}
	driver, handle := data["driverName"], data["volumeHandle"]
	client, err := m.csiv().csiClient(driver)
	if err != nil {
		return fmt.Errorf("UnmapVolume.UnmapBlockVolume failed for volume %q : %w", specName, err)
	}
	defer m.stagingLocks.lock(p.staging)()
	if err := os.Remove(p.podLink); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := m.blockv().unmapGlobal(specName, p.globalMap); err != nil {
		return err
	}
	if _, err := os.Lstat(p.publish); err == nil {
		if err := client.NodeUnpublishVolume(ctx, handle, p.publish); err != nil {
			return fmt.Errorf("UnmapVolume.UnmapBlockVolume failed for volume %q : %w", specName, err)
		}
	}
	if others, _ := os.ReadDir(p.publishDir); len(others) > 0 {
		return nil // another pod on the node has it
	}
	return m.blockv().unstageBlock(ctx, client, handle, p)
}

func (m blockVolumes) unstageBlock(ctx context.Context, client CSINodeClient, handle string, p blockPaths) error {
	caps, err := client.NodeCapabilities(ctx)
	if err != nil {
		return err
	}
	if caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		if err := client.NodeUnstageVolume(ctx, handle, p.staging); err != nil {
			return fmt.Errorf("UnmapDevice failed for volume %s : %w", handle, err)
		}
	}
	m.staged.remove(p.staging)
	if err := os.Remove(filepath.Join(p.data, csiVolDataFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, dir := range []string{p.staging, p.publishDir, filepath.Dir(p.globalMap), p.data, filepath.Dir(p.data)} {
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
