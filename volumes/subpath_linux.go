package volumes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
)

const subPathsDirName = "volume-subpaths"

// subPathDir is where a container's subPath mount of a volume is bind-mounted:
// <pod dir>/volume-subpaths/<volume name>/<container name>/<index>.
func (m subPaths) subPathDir(uid types.UID, volume, container string, index int) (string, error) {
	dir, err := m.podDir(uid)
	if err != nil {
		return "", err
	}
	if err := podrules.PathSegment("volume name", volume); err != nil {
		return "", err
	}
	if err := podrules.PathSegment("container name", container); err != nil {
		return "", err
	}
	if index < 0 {
		return "", fmt.Errorf("volume %q of container %q: negative mount index %d", volume, container, index)
	}
	return filepath.Join(dir, subPathsDirName, volume, container, strconv.Itoa(index)), nil
}

// subPathError is a subPath failure: its message is the kubelet's, which says nothing about the host's
// file system (it reaches the pod's events); the cause is kept for logs.
type subPathError struct {
	msg   string
	cause error
}

func (e *subPathError) Error() string { return e.msg }
func (e *subPathError) Unwrap() error { return e.cause }

// prepareSubPath makes the subPath of a volume mountable without letting the container escape the
// volume, as the kubelet does: a missing subPath is created as a directory (with the volume's mode),
// then the subPath is opened one path element at a time without following symlinks, inside the volume
// (symlinks are resolved first and must stay inside it), and the opened file is bind-mounted at
// <pod>/volume-subpaths/<volume>/<container>/<index>, which is what the runtime mounts.
func (m subPaths) prepareSubPath(pod *corev1.Pod, container string, index int, volume, volPath, subPath string) (string, error) {
	if !exists(filepath.Join(volPath, subPath)) {
		if err := safeMakeDir(volPath, subPath); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", &subPathError{
				msg:   fmt.Sprintf("failed to create subPath directory for volumeMount %q of container %q", volume, container),
				cause: err,
			}
		}
	}
	target, err := m.subp().subPathDir(pod.UID, volume, container, index)
	if err != nil {
		return "", err
	}
	if err := m.subp().bindSubPath(volPath, filepath.Join(volPath, subPath), target); err != nil {
		return "", &subPathError{
			msg:   fmt.Sprintf("failed to prepare subPath for volumeMount %q of container %q", volume, container),
			cause: err,
		}
	}
	return target, nil
}

// bindSubPath bind-mounts path, which must be inside volPath once symlinks are resolved, at target.
func (m subPaths) bindSubPath(volPath, path, target string) error {
	base, err := filepath.EvalSymlinks(volPath)
	if err != nil {
		return fmt.Errorf("error resolving symlinks in %q: %w", volPath, err)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("error resolving symlinks in %q: %w", path, err)
	}
	if !withinBase(real, base) {
		return fmt.Errorf("subpath %q not within volume path %q", real, base)
	}
	fd, err := safeOpen(real, base)
	if err != nil {
		return fmt.Errorf("error opening subpath %v: %w", real, err)
	}
	defer func() { _ = unix.Close(fd) }()
	done, err := m.subp().prepareBindTarget(real, target)
	if err != nil || done {
		return err
	}
	// The kernel follows /proc/<pid>/fd/<fd> to the file opened above, whatever the path now names.
	source := fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fd)
	if err := m.mounter().BindMount(source, target, false); err != nil {
		_ = os.Remove(target)
		return fmt.Errorf("error mounting %s: %w", real, err)
	}
	return nil
}

// prepareBindTarget creates the bind target (a directory or an empty file, like the source), or says
// it is already bind-mounted from source. A target mounted from something else (the volume's content
// changed) is unmounted first.
func (m subPaths) prepareBindTarget(source, target string) (bool, error) {
	mounted, err := m.mounter().IsMountPoint(target)
	if err != nil {
		return false, err
	}
	if mounted {
		if sameFile(source, target) {
			return true, nil
		}
		if err := m.mounter().Unmount(target); err != nil {
			return false, fmt.Errorf("unmount stale subpath %s: %w", target, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(target), volumesDirPerm); err != nil {
		return false, err
	}
	info, err := os.Lstat(source)
	if err != nil {
		return false, err
	}
	if info.IsDir() {
		if err := os.Mkdir(target, volumesDirPerm); err != nil && !os.IsExist(err) {
			return false, err
		}
		return false, nil
	}
	return false, os.WriteFile(target, nil, 0o640)
}

func sameFile(a, b string) bool {
	ia, err := os.Lstat(a)
	if err != nil {
		return false
	}
	ib, err := os.Lstat(b)
	return err == nil && os.SameFile(ia, ib)
}

// withinBase says whether path is base or beneath it (both clean and absolute).
func withinBase(path, base string) bool {
	rel, err := filepath.Rel(base, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// safeOpen opens path (symlinks already resolved) with O_PATH, walking from base one element at a time
// with openat and O_NOFOLLOW, so that nothing swapped for a symlink meanwhile leads outside base.
func safeOpen(path, base string) (int, error) {
	rel, err := filepath.Rel(base, path)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("cannot open directory %s: %w", base, err)
	}
	for _, seg := range strings.Split(rel, "/") {
		child, err := openNoFollow(fd, seg)
		_ = unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("cannot open %s in %s: %w", seg, base, err)
		}
		fd = child
	}
	return fd, nil
}

// openNoFollow opens name in the directory dirfd with O_PATH, refusing a symlink.
func openNoFollow(dirfd int, name string) (int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("unexpected symlink found %s", name)
	}
	return fd, nil
}

// safeMakeDir creates the directory subPath inside base with base's mode: the part that exists is
// resolved and must stay inside base; the rest is created with mkdirat, one element at a time,
// never through a symlink.
func safeMakeDir(base, subPath string) error {
	realBase, err := filepath.EvalSymlinks(base)
	if err != nil {
		return fmt.Errorf("error resolving symlinks in %s: %w", base, err)
	}
	info, err := os.Stat(realBase)
	if err != nil {
		return err
	}
	existing, missing := existingPrefix(realBase, filepath.Clean(subPath))
	realExisting, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return err
	}
	if !withinBase(realExisting, realBase) {
		return fmt.Errorf("path %s is outside of allowed base %s", realExisting, realBase)
	}
	fd, err := safeOpen(realExisting, realBase)
	if err != nil {
		return err
	}
	return mkdirChain(fd, missing, info.Mode())
}

// existingPrefix splits base/subPath into the longest existing path and the elements missing after it.
func existingPrefix(base, subPath string) (string, []string) {
	segs := strings.Split(subPath, "/")
	cur := base
	for i, seg := range segs {
		next := filepath.Join(cur, seg)
		if !exists(next) {
			return cur, segs[i:]
		}
		cur = next
	}
	return cur, nil
}

// mkdirChain creates the directories names, each inside the previous, under the directory fd (which it
// closes), with mode perm whatever the umask.
func mkdirChain(fd int, names []string, perm os.FileMode) error {
	kernelPerm := uint32(perm & os.ModePerm)
	if perm&os.ModeSetgid != 0 {
		kernelPerm |= unix.S_ISGID
	}
	if perm&os.ModeSticky != 0 {
		kernelPerm |= unix.S_ISVTX
	}
	defer func() { _ = unix.Close(fd) }()
	for _, name := range names {
		if err := unix.Mkdirat(fd, name, kernelPerm); err != nil {
			return fmt.Errorf("cannot create directory %s: %w", name, err)
		}
		child, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("cannot open %s: %w", name, err)
		}
		_ = unix.Close(fd)
		fd = child
		if err := unix.Fchmod(fd, kernelPerm); err != nil {
			return fmt.Errorf("chmod %s: %w", name, err)
		}
	}
	return nil
}
