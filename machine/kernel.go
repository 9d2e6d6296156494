package machine

import "fmt"

// KernelRelease is the running kernel's release, as uname -r prints it (e.g. "6.1.0-18-amd64").
func (r Reader) KernelRelease() (string, error) {
	release, err := r.readTrimmed("/proc/sys/kernel/osrelease")
	if err != nil {
		return "", fmt.Errorf("read kernel version: %w", err)
	}
	return release, nil
}
