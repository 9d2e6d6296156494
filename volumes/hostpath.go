package volumes

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// checkHostPath validates a hostPath volume and checks (or creates) what its type asks for, with the
// kubelet's messages. Nothing is mounted: the runtime bind-mounts the path itself.
func checkHostPath(src *corev1.HostPathVolumeSource) error {
	if slices.Contains(strings.Split(src.Path, "/"), "..") {
		return fmt.Errorf("invalid HostPath `%s`: must not contain '..'", src.Path)
	}
	if src.Type == nil || *src.Type == corev1.HostPathUnset {
		return nil
	}
	check, ok := hostPathChecks[*src.Type]
	if !ok {
		return fmt.Errorf("%s is an invalid volume type", *src.Type)
	}
	if check.create != nil && !exists(src.Path) {
		return check.create(src.Path)
	}
	return typeIs(src.Path, check.want, check.what)
}

// hostPathCheck is what a hostPath type asks for: a type of file, created when missing if create is set.
type hostPathCheck struct {
	want   corev1.HostPathType
	what   string
	create func(path string) error
}

var hostPathChecks = map[corev1.HostPathType]hostPathCheck{
	corev1.HostPathDirectoryOrCreate: {corev1.HostPathDirectory, "directory", makeDir},
	corev1.HostPathDirectory:         {corev1.HostPathDirectory, "directory", nil},
	corev1.HostPathFileOrCreate:      {corev1.HostPathFile, "file", makeFile},
	corev1.HostPathFile:              {corev1.HostPathFile, "file", nil},
	corev1.HostPathSocket:            {corev1.HostPathSocket, "socket file", nil},
	corev1.HostPathCharDev:           {corev1.HostPathCharDev, "character device", nil},
	corev1.HostPathBlockDev:          {corev1.HostPathBlockDev, "block device", nil},
}

// makeDir creates the directory and its parents with mode 0755.
func makeDir(path string) error { return os.MkdirAll(path, 0o755) }

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// makeFile creates an empty file (0644) unless something is there. Like the kubelet it does not create
// missing parent directories: the pod then fails to start with the error.
func makeFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

func typeIs(path string, want corev1.HostPathType, what string) error {
	got, err := fileType(path)
	if err != nil {
		return fmt.Errorf("hostPath type check failed, %s is not a %s, unable to determine its type: %w", path, what, err)
	}
	if got != want {
		return fmt.Errorf("hostPath type check failed: %s is not a %s, it's a %s", path, what, got)
	}
	return nil
}

var errUnknownFileType = errors.New("only recognise file, directory, socket, block device and character device")

// fileType is the type of what path names (symlinks followed), in the hostPath type's terms.
func fileType(path string) (corev1.HostPathType, error) {
	info, err := os.Stat(path)
	if os.IsNotExist(err) {
		return "", fmt.Errorf("path %q does not exist", path)
	}
	if err != nil {
		return "", err
	}
	mode := info.Mode()
	switch {
	case mode.IsDir():
		return corev1.HostPathDirectory, nil
	case mode.IsRegular():
		return corev1.HostPathFile, nil
	case mode&os.ModeSocket != 0:
		return corev1.HostPathSocket, nil
	case mode&os.ModeCharDevice != 0:
		return corev1.HostPathCharDev, nil
	case mode&os.ModeDevice != 0:
		return corev1.HostPathBlockDev, nil
	}
	return "", errUnknownFileType
}
