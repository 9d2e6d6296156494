package volumes

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"

	corev1 "k8s.io/api/core/v1"
)

// Permission bits the kubelet adds for fsGroup (pkg/volume/volume_linux.go).
const (
	rwMask   os.FileMode = 0o660
	roMask   os.FileMode = 0o440
	execMask os.FileMode = 0o110
)

// setVolumeOwnership gives the volume at dir to fsGroup, as the kubelet's SetVolumeOwnership: every
// file and directory (children before the root) gets group fsGroup and g+rw (g+r for a read-only
// volume), directories also g+x and setgid; symlinks are chowned but not chmodded. With policy
// OnRootMismatch nothing is done when the root already has the group and the bits.
func setVolumeOwnership(dir string, fsGroup *int64, policy *corev1.PodFSGroupChangePolicy, readOnly bool) error {
	if fsGroup == nil {
		return nil
	}
	if policy != nil && *policy == corev1.FSGroupChangeOnRootMismatch && !rootMismatch(dir, *fsGroup, readOnly) {
		return nil
	}
	return walkPostOrder(dir, func(path string, info os.FileInfo) error {
		return changePermission(path, info, int(*fsGroup), readOnly)
	})
}

func changePermission(path string, info os.FileInfo, gid int, readOnly bool) error {
	if err := os.Lchown(path, -1, gid); err != nil {
		return err
	}
	if info.Mode()&os.ModeSymlink != 0 {
		return nil
	}
	mask := rwMask
	if readOnly {
		mask = roMask
	}
	if info.IsDir() {
		mask |= os.ModeSetgid | execMask
	}
	return os.Chmod(path, info.Mode()|mask)
}

// rootMismatch says whether the volume root lacks the group or the permission bits fsGroup asks for.
func rootMismatch(dir string, fsGroup int64, readOnly bool) bool {
	info, err := os.Stat(dir)
	if err != nil || !info.IsDir() {
		return true
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || int64(st.Gid) != fsGroup {
		return true
	}
	want := rwMask | execMask
	if readOnly {
		want = roMask | execMask
	}
	return info.Mode().Perm()&want != want || info.Mode()&os.ModeSetgid == 0
}

// walkPostOrder calls fn for everything under root, children before their directory, without
// following symlinks.
func walkPostOrder(root string, fn func(path string, info os.FileInfo) error) error {
	info, err := os.Lstat(root)
	if err != nil {
		return err
	}
	if info.IsDir() {
		entries, err := os.ReadDir(root)
		if err != nil {
			return err
		}
		var errs []error
		for _, e := range entries {
			errs = append(errs, walkPostOrder(filepath.Join(root, e.Name()), fn))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return fn(root, info)
}
