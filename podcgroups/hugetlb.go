package podcgroups

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nodelet/nodelet/podrules"
)

const hugetlbController = "hugetlb"

// qosHugePageLimit is the kubelet's huge page limit of the QoS cgroups (setHugePagesUnbounded): 1<<62 bytes,
// no limit in effect.
const qosHugePageLimit = int64(1) << 62

// hugetlbValues are the hugetlb limits as runc writes the kubelet's (its maybeSetHugetlb): for each of the
// host's page sizes (HugePageSizes) the limit that limit gives it, as hugetlb.<size>.limit_in_bytes (v1) or
// hugetlb.<size>.max (v2), and the same as the size's reservation limit (hugetlb.<size>.rsvd.*) where the
// kernel has one. None without HugePageSizes.
func (m *Manager) hugetlbValues(limit func(size int64) int64) []cgroupValue {
	suffix := ".limit_in_bytes"
	if m.Unified {
		suffix = ".max"
	}
	var out []cgroupValue
	for _, size := range m.HugePageSizes {
		name, ok := podrules.HugePageSizeName(size)
		if !ok {
			continue
		}
		v := strconv.FormatInt(max(limit(size), 0), 10)
		prefix := "hugetlb." + name
		out = append(out, cgroupValue{hugetlbController, prefix + suffix, v},
			cgroupValue{hugetlbController, prefix + ".rsvd" + suffix, v})
	}
	return out
}

// limitOf reads a limit by page size from limits, 0 for a size it lacks.
func limitOf(limits map[int64]int64) func(int64) int64 {
	return func(size int64) int64 { return limits[size] }
}

// optionalFile tells the control files written only where the kernel has them: the hugetlb reservation
// limits (Linux 5.7 and later), which runc skips on older kernels.
func optionalFile(file string) bool {
	return strings.HasPrefix(file, "hugetlb.") && strings.Contains(file, ".rsvd.")
}

// writeControl writes a control file; an optional one that does not exist is left out.
func writeControl(path, value string) error {
	if !optionalFile(filepath.Base(path)) {
		return os.WriteFile(path, []byte(value), 0o644)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	return errors.Join(err, f.Close())
}

// HugetlbAvailable reports whether pod cgroups can get huge page limits at root, as the kubelet checks before
// it sets them: the hugetlb hierarchy mounted on cgroup v1, the controller listed in the root's
// cgroup.controllers on v2.
func HugetlbAvailable(root string, unified bool) bool {
	if !unified {
		_, err := os.Stat(filepath.Join(root, hugetlbController, "cgroup.procs"))
		return err == nil
	}
	b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	return err == nil && slices.Contains(strings.Fields(string(b)), hugetlbController)
}

// SwapController reports whether the memory controller limits swap, as the kubelet's swapControllerAvailable
// decides it: memory.memsw.limit_in_bytes in the memory hierarchy on cgroup v1; on v2 memory.swap.max in the
// cgroup of the process (the root cgroup has none), read from procSelfCgroup (/proc/self/cgroup).
func SwapController(root string, unified bool, procSelfCgroup string) bool {
	p := filepath.Join(root, memoryController, "memory.memsw.limit_in_bytes")
	if unified {
		self, ok := unifiedCgroup(procSelfCgroup)
		if !ok {
			return false
		}
		p = filepath.Join(root, filepath.FromSlash(self), "memory.swap.max")
	}
	_, err := os.Stat(p)
	return err == nil
}

// unifiedCgroup is the cgroup v2 path ("0::/path") in a /proc/<pid>/cgroup file.
func unifiedCgroup(file string) (string, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, true
		}
	}
	return "", false
}
