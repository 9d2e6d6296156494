package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A mapped block volume is held open by a loop device over its global map path (the device file bind-mounted
// for the pod), as the kubelet's volumepathhandler does with `losetup -f --show`: while a pod maps the volume,
// its block device cannot silently go away and come back as another device of the same name. The device is
// found again by its backing file (what `losetup -j` reports), so one set up by the kubelet before a takeover
// is detached by nodelet's teardown.

// loopSysDir is where the kernel shows loop devices and their backing files.
const loopSysDir = "/sys/block"

// loopDeviceOf returns the loop device (/dev/loopN) whose backing file is path (or what path's symlinks
// resolve to), "" when there is none. The kernel shows a backing file removed since with " (deleted)".
func loopDeviceOf(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	files, err := filepath.Glob(filepath.Join(loopSysDir, "loop*", "loop", "backing_file"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // detached meanwhile
		}
		backing := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(data)), "(deleted)"))
		if backing == path || backing == real {
			return "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f))), nil
		}
	}
	return "", nil
}

// AttachFileDevice makes a loop device over path, or finds the one already there.
func (realMounter) AttachFileDevice(path string) error {
	if dev, err := loopDeviceOf(path); err != nil || dev != "" {
		return err
	}
	backing, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) {
		backing, err = os.Open(path) // losetup falls back to read-only the same way
	}
	if err != nil {
		return err
	}
	defer backing.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer ctl.Close()
	// Another process may take the free device between the two calls: ask again.
	for range 8 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return fmt.Errorf("find a free loop device: %w", err)
		}
		err = setLoopFD(fmt.Sprintf("/dev/loop%d", n), backing)
		if !errors.Is(err, unix.EBUSY) {
			return err
		}
	}
	return fmt.Errorf("attach a loop device to %s: every free loop device was taken meanwhile", path)
}

func setLoopFD(dev string, backing *os.File) error {
	loop, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer loop.Close()
	return unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_SET_FD, int(backing.Fd()))
}

// DetachFileDevice detaches the loop device over path; none there is no error.
func (realMounter) DetachFileDevice(path string) error {
	dev, err := loopDeviceOf(path)
	if err != nil || dev == "" {
		return err
	}
	loop, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer loop.Close()
	if err := unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("detach %s from %s: %w", dev, path, err)
	}
	return nil
}
