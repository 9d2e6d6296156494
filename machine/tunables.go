package machine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// kernelDefaults are the kernel tunables the kubelet requires (its setupKernelTunables), by sysctl path
// under /proc/sys.
var kernelDefaults = map[string]int{
	utilsysctl.VMOvercommitMemory: utilsysctl.VMOvercommitMemoryAlways,
	utilsysctl.VMPanicOnOOM:       utilsysctl.VMPanicOnOOMInvokeOOMKiller,
	utilsysctl.KernelPanic:        utilsysctl.KernelPanicRebootTimeout,
	utilsysctl.KernelPanicOnOops:  utilsysctl.KernelPanicOnOopsAlways,
	utilsysctl.RootMaxKeys:        utilsysctl.RootMaxKeysSetting,
	utilsysctl.RootMaxBytes:       utilsysctl.RootMaxBytesSetting,
}

// CheckKernelDefaults is protectKernelDefaults: an error naming every kernel tunable that differs from the
// kubelet's required value (or cannot be read), in the kubelet's words, so start-up fails as the
// kubelet's does. nodelet never changes the tunables itself.
func (r Reader) CheckKernelDefaults() error {
	names := make([]string, 0, len(kernelDefaults))
	for name := range kernelDefaults {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		want := kernelDefaults[name]
		s, err := r.readTrimmed(filepath.Join("/proc/sys", name))
		if err != nil {
			errs = append(errs, fmt.Errorf("read kernel flag %s: %w", name, err))
			continue
		}
		got, err := strconv.Atoi(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("read kernel flag %s: %w", name, err))
			continue
		}
		if got != want {
			errs = append(errs, fmt.Errorf("invalid kernel flag: %v, expected value: %v, actual value: %v", name, want, got))
		}
	}
	return errors.Join(errs...)
}

// tunableNames are kernelDefaults' names, sorted.
func tunableNames() []string {
	names := make([]string, 0, len(kernelDefaults))
	for name := range kernelDefaults {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// SetKernelDefaults is protectKernelDefaults false, the kubelet's default: every kernel tunable that
// differs from the kubelet's value is set to it, and the ones changed are returned. A tunable that cannot
// be read or written is an error, as it fails the kubelet's start.
func (r Reader) SetKernelDefaults() (changed []string, err error) {
	var errs []error
	for _, name := range tunableNames() {
		want := kernelDefaults[name]
		p := filepath.Join("/proc/sys", name)
		s, err := r.readTrimmed(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("read kernel flag %s: %w", name, err))
			continue
		}
		if got, err := strconv.Atoi(s); err == nil && got == want {
			continue
		}
		if err := os.WriteFile(r.path(p), []byte(strconv.Itoa(want)), 0o644); err != nil { //nolint:gosec // a sysctl file
			errs = append(errs, fmt.Errorf("set kernel flag %s to %d: %w", name, want, err))
			continue
		}
		changed = append(changed, fmt.Sprintf("%s=%d (was %s)", name, want, s))
	}
	return changed, errors.Join(errs...)
}
