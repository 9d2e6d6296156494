package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/apimachinery/pkg/types"
)

// tearDownCSI unpublishes every CSI volume of the pod and unstages those no other pod on this node still
// uses, as the kubelet's CSI plugin: each is found on disk from its vol_data.json, so a volume published
// before a restart, or by the kubelet before a takeover, is torn down the same way. A driver that is not
// registered, or a call that fails, is an error: the caller retries, and nothing is removed meanwhile.
func (m csiVolumes) tearDownCSI(ctx context.Context, uid types.UID, podDir string) error {
	dirs, err := filepath.Glob(filepath.Join(podDir, "volumes", pluginCSI, "*"))
	if err != nil {
		return err
	}
	for _, dir := range dirs {
		if err := m.csiv().tearDownCSIVolume(ctx, uid, dir); err != nil {
			return err
		}
	}
	m.inUseChanged(m.inUse.removePod(uid))
	return nil
}

// tearDownCSIVolume unpublishes one volume directory of a pod, then unstages it if it was the last user.
func (m csiVolumes) tearDownCSIVolume(ctx context.Context, uid types.UID, dir string) error {
	data, err := loadVolData(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil // never published by a driver: the generic teardown removes what is there
	}
	if err != nil {
		return err
	}
	driver, handle := data["driverName"], data["volumeHandle"]
	client, err := m.csiv().csiClient(driver)
	if err != nil {
		return fmt.Errorf("UnmountVolume.TearDown failed for volume %q : %w", data["specVolID"], err)
	}
	target := filepath.Join(dir, csiMountDir)
	if _, err := os.Lstat(target); err == nil {
		start := m.clock().Now()
		err := client.NodeUnpublishVolume(ctx, handle, target)
		m.observeOp(csiQualifiedPluginName(driver), opVolumeUnmount, start, err)
		if err != nil {
			return fmt.Errorf("UnmountVolume.TearDown failed for volume %q : %w", data["specVolID"], err)
		}
	}
	if err := removeVolumeDir(m.mounter(), target); err != nil {
		return err
	}
	if data["volumeLifecycleMode"] == csiModeEphemeral {
		return nil
	}
	return m.csiv().unstageIfUnused(ctx, uid, client, driver, handle)
}

// unstageIfUnused unstages a persistent volume once no other pod's directory still has it published,
// and removes its staging directory.
func (m csiVolumes) unstageIfUnused(ctx context.Context, uid types.UID, client CSINodeClient, driver, handle string) error {
	staging, err := m.csiv().stagingPath(driver, handle)
	if err != nil {
		return err
	}
	defer m.stagingLocks.lock(staging)()
	used, err := m.csiv().publishedElsewhere(uid, driver, handle)
	if err != nil || used {
		return err
	}
	if _, err := loadVolData(filepath.Dir(staging)); errors.Is(err, os.ErrNotExist) {
		return nil // not staged on this node
	}
	caps, err := client.NodeCapabilities(ctx)
	if err != nil {
		return fmt.Errorf("failed to read the node capabilities of CSI driver %s: %w", driver, err)
	}
	if caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		start := m.clock().Now()
		err := client.NodeUnstageVolume(ctx, handle, staging)
		m.observeOp(csiQualifiedPluginName(driver), opUnmountDevice, start, err)
		if err != nil {
			return fmt.Errorf("UnmountDevice failed for volume %s : %w", handle, err)
		}
	}
	m.staged.remove(staging)
	if err := removeVolumeDir(m.mounter(), staging); err != nil {
		return err
	}
	return nil
}

// publishedElsewhere says whether a pod other than uid has the driver's volume handle published (a
// vol_data.json naming it in its directory).
func (m csiVolumes) publishedElsewhere(uid types.UID, driver, handle string) (bool, error) {
	dirs, err := filepath.Glob(filepath.Join(m.RootDir, "pods", "*", "volumes", pluginCSI, "*"))
	if err != nil {
		return false, err
	}
	for _, dir := range dirs {
		if filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(dir)))) == string(uid) {
			continue
		}
		data, err := loadVolData(dir)
		if err != nil {
			continue
		}
		if data["driverName"] == driver && data["volumeHandle"] == handle {
			return true, nil
		}
	}
	return false, nil
}

// removeVolumeDir removes a mount directory that is no longer mounted, then its vol_data.json and
// the directory holding both, as the kubelet's removeMountDir. Something still mounted is an error.
func removeVolumeDir(mounter Mounter, mountDir string) error {
	mounted, err := mounter.IsMountPoint(mountDir)
	if err != nil {
		return err
	}
	if mounted {
		return fmt.Errorf("%s is still mounted", mountDir)
	}
	if err := os.Remove(mountDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(mountDir)
	if err := os.Remove(filepath.Join(parent, csiVolDataFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Remove(parent); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// CleanUpStaged unstages the persistent CSI volumes staged on this node that no pod has published and
// no pod of this manager is setting up: those a restart or a takeover left behind (a pod deleted between
// its unpublish and its volume's unstage). A driver that is not registered leaves its volumes for a later
// pass. It returns the first error; the others are retried at the next pass as well.
func (m *Manager) CleanUpStaged(ctx context.Context) error {
	dirs, err := filepath.Glob(filepath.Join(m.RootDir, "plugins", csiPluginName, "*", "*", csiVolDataFile))
	if err != nil {
		return err
	}
	var first error
	for _, file := range dirs {
		data, err := loadVolData(filepath.Dir(file))
		if err != nil {
			continue
		}
		if err := m.csiv().cleanUpStaged(ctx, data["driverName"], data["volumeHandle"]); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (m csiVolumes) cleanUpStaged(ctx context.Context, driver, handle string) error {
	if m.csiv().claimedByAPod(driver, handle) {
		return nil
	}
	client, err := m.csiv().csiClient(driver)
	if err != nil {
		return err
	}
	return m.csiv().unstageIfUnused(ctx, "", client, driver, handle)
}

// claimedByAPod says whether a pod this manager knows uses the CSI volume.
func (m csiVolumes) claimedByAPod(driver, handle string) bool {
	m.mu.Lock()
	pods := make([]*podVolumes, 0, len(m.pods))
	for _, pv := range m.pods {
		pods = append(pods, pv)
	}
	m.mu.Unlock()
	for _, pv := range pods {
		pv.mu.Lock()
		for _, cv := range pv.claims {
			if src := cv.pv.Spec.CSI; src != nil && src.Driver == driver && src.VolumeHandle == handle {
				pv.mu.Unlock()
				return true
			}
		}
		pv.mu.Unlock()
	}
	return false
}
