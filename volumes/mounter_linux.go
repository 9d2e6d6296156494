package volumes

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"
)

// realMounter does the mount syscalls itself (nodelet runs as root in the host's mount namespace).
type realMounter struct{}

// MountTmpfs mounts a tmpfs at target, of sizeBytes (0: the kernel's default, half of RAM).
func (realMounter) MountTmpfs(target string, sizeBytes int64) error {
	data := ""
	if sizeBytes > 0 {
		data = "size=" + strconv.FormatInt(sizeBytes, 10)
	}
	return unix.Mount("tmpfs", target, "tmpfs", 0, data)
}

// BindMount bind-mounts source at target, then makes it read-only if asked.
func (realMounter) BindMount(source, target string, readOnly bool) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	if !readOnly {
		return nil
	}
	return unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
}

// FormatAndMount is mount-utils' SafeFormatAndMount: blkid tells whether the device has a filesystem,
// mkfs.<fsType> makes one when it has none, then it is mounted.
func (realMounter) FormatAndMount(device, target, fsType string, options []string) error {
	return mount.NewSafeFormatAndMount(mount.New(""), utilexec.New()).FormatAndMount(device, target, fsType, options)
}

// Unmount unmounts target.
func (realMounter) Unmount(target string) error {
	return unix.Unmount(target, 0)
}

// IsMountPoint says whether something is mounted at path (false if path does not exist). statx
// answers directly where the kernel reports mount roots (Linux 5.8+); else /proc/self/mountinfo does.
func (realMounter) IsMountPoint(path string) (bool, error) {
	real, err := filepath.EvalSymlinks(path)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, real, unix.AT_SYMLINK_NOFOLLOW, 0, &stx); err == nil &&
		stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	points, err := mountPoints()
	if err != nil {
		return false, err
	}
	for _, p := range points {
		if p == real {
			return true, nil
		}
	}
	return false, nil
}

// MountPointsUnder lists what is mounted at or beneath dir, deepest last.
func (realMounter) MountPointsUnder(dir string) ([]string, error) {
	points, err := mountPoints()
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range points {
		if withinBase(p, real) {
			out = append(out, p)
		}
	}
	return out, nil
}

// mountPoints lists the mount points of this mount namespace, in mount order.
func mountPoints() ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseMountInfo(data)
}

// parseMountInfo returns the mount point (5th field, octal escapes decoded) of each mountinfo line.
func parseMountInfo(data []byte) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			return nil, fmt.Errorf("malformed mountinfo line %q", sc.Text())
		}
		out = append(out, unescapeOctal(fields[4]))
	}
	return out, sc.Err()
}

// unescapeOctal decodes the \NNN escapes the kernel writes for space, tab, newline and backslash.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// MakeRShared makes sure path is on a mount with shared propagation, bind-mounting it onto itself and
// marking it rshared when it is not, as the kubelet does with its root directory at start: a container
// mounting a volume with Bidirectional propagation (a CSI driver publishing into pods' directories)
// needs its source on a shared mount.
func MakeRShared(path string) error {
	shared, err := onSharedMount(path, "/proc/self/mountinfo")
	if err != nil || shared {
		return err
	}
	if err := unix.Mount(path, path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mount %s onto itself: %w", path, err)
	}
	if err := unix.Mount("", path, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s rshared: %w", path, err)
	}
	return nil
}

// onSharedMount says whether the mount holding path (the last one in mountinfo whose mount point
// contains it) has shared propagation.
func onSharedMount(path, mountInfoPath string) (bool, error) {
	infos, err := mount.ParseMountInfo(mountInfoPath)
	if err != nil {
		return false, err
	}
	for i := len(infos) - 1; i >= 0; i-- {
		if !mount.PathWithinBase(path, infos[i].MountPoint) {
			continue
		}
		for _, opt := range infos[i].OptionalFields {
			if strings.HasPrefix(opt, "shared:") {
				return true, nil
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("cannot find mount point for %q", path)
}
