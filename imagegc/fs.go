package imagegc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/go-logr/logr"

	"github.com/nodelet/nodelet/machine"
)

// Filesystem reads the capacity and the available bytes of the filesystem holding path.
type Filesystem interface {
	// Usage returns fs.ErrNotExist (wrapped) when path does not exist on this host.
	Usage(path string) (capacity, available int64, err error)
}

// Statfs is the host's Filesystem: statfs(2), blocks and blocks available to unprivileged users times
// the block size, as cadvisor's GetDirFsInfo reports them to the kubelet.
type Statfs struct{}

// Usage implements Filesystem.
func (Statfs) Usage(path string) (capacity, available int64, err error) {
	u, err := machine.Statfs(path)
	return u.CapacityBytes, u.AvailableBytes, err
}

// imageFsStats is the kubelet's CRI stats provider's ImageFsStats as image GC uses it: the first image
// filesystem the runtime reports, its capacity and available bytes from the filesystem of its
// mountpoint. A filesystem the host does not know (no identifier, no such mountpoint) has capacity 0,
// which GarbageCollect reports as invalid.
func (m *Manager) imageFsStats(ctx context.Context) (capacity, available int64, err error) {
	log := logr.FromContextOrDiscard(ctx)
	resp, err := m.runtime.ImageFsInfo(ctx)
	if err != nil {
		return 0, 0, err
	}
	if len(resp.GetImageFilesystems()) == 0 {
		return 0, 0, errors.New("imageFs information is unavailable")
	}
	id := resp.GetImageFilesystems()[0].GetFsId()
	if id == nil {
		log.V(2).Info("Failed to get filesystem info: fsID is nil")
		return 0, 0, nil
	}
	capacity, available, err = m.fs.Usage(id.GetMountpoint())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		log.V(2).Info("Failed to get the info of the filesystem with mountpoint", "mountpoint", id.GetMountpoint(), "err", err)
		return 0, 0, nil
	case err != nil:
		log.Error(err, "Failed to get the info of the filesystem with mountpoint", "mountpoint", id.GetMountpoint())
		return 0, 0, fmt.Errorf("get filesystem info: %w", err)
	}
	return capacity, available, nil
}

// formatSize writes a byte count with binary units and one decimal ("26.4 GiB"), as the kubelet's
// FreeDiskSpaceFailed message does.
func formatSize(bytes int64) string {
	const unit = 1024
	if bytes < unit {
		return fmt.Sprintf("%d B", bytes)
	}
	value, prefix := float64(bytes)/unit, 0
	for value >= unit && prefix < len("KMGTPE")-1 {
		value /= unit
		prefix++
	}
	return fmt.Sprintf("%.1f %ciB", value, "KMGTPE"[prefix])
}
