package machine

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// FsUsage is a filesystem's size and what is left of it, as cAdvisor's GetDirFsInfo reports it to the
// kubelet: blocks and blocks available to unprivileged users times the block size, inodes and free inodes.
type FsUsage struct {
	CapacityBytes, AvailableBytes int64
	Inodes, InodesFree            int64
}

// Statfs reads the usage of the filesystem holding path (statfs(2)). A path that does not exist gives an
// error wrapping fs.ErrNotExist.
func Statfs(path string) (FsUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return FsUsage{}, &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	bs := int64(st.Bsize) //nolint:unconvert // Bsize's type differs across platforms
	//nolint:gosec // block and inode counts fit in int64
	return FsUsage{CapacityBytes: int64(st.Blocks) * bs, AvailableBytes: int64(st.Bavail) * bs,
		Inodes: int64(st.Files), InodesFree: int64(st.Ffree)}, nil
}
