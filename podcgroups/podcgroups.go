package podcgroups

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
)

// DefaultRoot is where the cgroup filesystem is mounted.
const DefaultRoot = "/sys/fs/cgroup"

const (
	pidsController   = "pids"
	cpuController    = "cpu"
	memoryController = "memory"
	pidsMax          = "pids.max"
	subtreeControl   = "cgroup.subtree_control"
	dirMode          = 0o755
)

// Manager creates and removes pod cgroups on one cgroup filesystem.
type Manager struct {
	// Root is the cgroup filesystem's mount point (DefaultRoot).
	Root string
	// Unified is true on cgroup v2 (one hierarchy at Root), false on v1 (a hierarchy per controller
	// under Root: Root/pids, Root/memory, ...).
	Unified bool
	// Kubepods is the kubepods cgroup's name written as a cgroupfs path (<cgroupRoot>/kubepods, e.g.
	// "/kubepods"), whatever the driver.
	Kubepods string
	// Driver is the cgroup driver: podrules.CgroupDriverCgroupfs (or "") or podrules.CgroupDriverSystemd, which
	// lays the cgroups out as slices (/kubepods.slice/kubepods-burstable.slice/...) made through Units.
	Driver string
	// Units is systemd, for the systemd driver.
	Units Units
	// PidsLimit is podPidsLimit; 0 or less sets no limit.
	PidsLimit int64
	// Resources: write the kubelet's cpu, memory and huge page values (podrules.PodCgroupResources) to pod
	// cgroups. Without it and without PidsLimit, pod cgroups are left to the runtime.
	Resources bool
	// HugePageSizes are the host's huge page sizes in bytes: with Resources each gets a hugetlb limit in the
	// pod, QoS and kubepods cgroups, as the kubelet sets them. Leave it empty where the hugetlb controller is
	// not available (HugetlbAvailable).
	HugePageSizes []int64

	// duration is kubelet_cgroup_manager_duration_seconds (nil: not observed; see RegisterMetrics).
	duration *prometheus.HistogramVec

	// mkdir and rmdir make and remove one cgroup (os.Mkdir, unix.Rmdir; tests fake cgroupfs with them).
	mkdir, rmdir func(dir string) error
}

// New returns a manager for the host's cgroup filesystem at root, detecting v1 or v2. With the systemd
// driver, units is the connection to systemd.
func New(root, kubepods string, pidsLimit int64, resources bool, driver string, units Units) (*Manager, error) {
	unified, err := IsUnified(root)
	if err != nil {
		return nil, err
	}
	if driver == podrules.CgroupDriverSystemd && units == nil {
		return nil, errors.New("the systemd cgroup driver needs a connection to systemd")
	}
	return &Manager{Root: root, Unified: unified, Kubepods: kubepods, PidsLimit: pidsLimit, Resources: resources,
		Driver: driver, Units: units}, nil
}

// IsUnified reports whether the cgroup filesystem at root is cgroup v2 (the unified hierarchy), as runc's
// IsCgroup2UnifiedMode decides it: by the filesystem type of its mount point.
func IsUnified(root string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return false, fmt.Errorf("stat cgroup filesystem %s: %w", root, err)
	}
	return st.Type == unix.CGROUP2_SUPER_MAGIC, nil
}

// Ensure makes the pod cgroup parent (its name written as a cgroupfs path, podrules.PodCgroupName's ToCgroupfs,
// whatever the driver) as the kubelet's pod container manager does before the sandbox runs: with Resources, cpu shares, the CFS quota and period and
// the memory limit of res; with PidsLimit, pids.max. On cgroup v2 the controllers are enabled down to the
// pod cgroup, as runc would, and the values are the v2 ones (cpu.weight, cpu.max, memory.max).
func (m *Manager) Ensure(parent string, res podrules.PodCgroup) error {
	if m.PidsLimit <= 0 && !m.Resources {
		return nil
	}
	defer m.observe(opCreate, time.Now())
	if !m.underKubepods(parent) {
		return fmt.Errorf("pod cgroup %q is not under %s", parent, m.Kubepods)
	}
	var values []cgroupValue
	if m.Resources {
		values = m.resourceValues(res)
	}
	if m.PidsLimit > 0 {
		values = append(values, cgroupValue{pidsController, pidsMax, strconv.FormatInt(m.PidsLimit, 10)})
	}
	return m.write(parent, values)
}

// write makes the cgroup parent (a name, as a cgroupfs path) in each value's hierarchy and writes the values
// in order. With the systemd driver, the slice unit is made first with the values as its properties.
func (m *Manager) write(parent string, values []cgroupValue) error {
	name := podrules.ParseCgroupfs(parent)
	if m.systemd() {
		if err := m.startSlice(context.Background(), name, values); err != nil {
			return err
		}
	}
	for _, v := range values {
		dir, err := m.makeDir(name, v.controller)
		if err != nil {
			return err
		}
		if err := writeControl(filepath.Join(dir, v.file), v.value); err != nil {
			return fmt.Errorf("set %s of cgroup %s: %w", v.file, name.Path(m.Driver), err)
		}
	}
	return nil
}

// systemd reports whether the driver is systemd.
func (m *Manager) systemd() bool { return m.Driver == podrules.CgroupDriverSystemd }

// cgroupPath is name's path in the driver's layout.
func (m *Manager) cgroupPath(name podrules.CgroupName) string {
	return filepath.FromSlash(name.Path(m.Driver))
}

// UpdateQoS writes the QoS cgroups' values as the kubelet's QoS container manager does before each pod
// cgroup is made: besteffort gets the minimum cpu shares, burstable the shares of the summed cpu requests of
// the node's Burstable pods (burstableMilliCPU); both, and kubepods (the Guaranteed pods' tier, which lives
// directly under it), get no huge page limit in effect: 1<<62 bytes for each size. Without Resources it does
// nothing.
func (m *Manager) UpdateQoS(burstableMilliCPU int64) error {
	if !m.Resources {
		return nil
	}
	defer m.observe(opUpdate, time.Now())
	unbounded := m.hugetlbValues(func(int64) int64 { return qosHugePageLimit })
	if len(unbounded) > 0 {
		if err := m.write(path.Join("/", m.Kubepods), unbounded); err != nil {
			return fmt.Errorf("QoS cgroup for Guaranteed pods: %w", err)
		}
	}
	for _, qos := range []struct {
		class  corev1.PodQOSClass
		shares int64
	}{{corev1.PodQOSBurstable, podrules.MilliCPUToShares(burstableMilliCPU)}, {corev1.PodQOSBestEffort, podrules.MinShares}} {
		v := cgroupValue{cpuController, "cpu.shares", strconv.FormatInt(qos.shares, 10)}
		if m.Unified {
			v = cgroupValue{cpuController, "cpu.weight", strconv.FormatUint(sharesToWeight(qos.shares), 10)}
		}
		name := podrules.QoSCgroupName(m.kubepodsName(), qos.class)
		if err := m.write(name.ToCgroupfs(), append([]cgroupValue{v}, unbounded...)); err != nil {
			return fmt.Errorf("QoS cgroup for %s pods: %w", qos.class, err)
		}
	}
	return nil
}

// cgroupValue is one control file's value, in the hierarchy of controller (v1).
type cgroupValue struct{ controller, file, value string }

// resourceValues are the cpu, memory and hugetlb control files of res, in the order the kubelet's cgroup
// manager writes them (the period before the quota).
func (m *Manager) resourceValues(res podrules.PodCgroup) []cgroupValue {
	return append(m.cpuMemoryValues(res), m.hugetlbValues(limitOf(res.HugePageLimits))...)
}

// cpuMemoryValues are the cpu and memory control files of res.
func (m *Manager) cpuMemoryValues(res podrules.PodCgroup) []cgroupValue {
	period := strconv.Itoa(podrules.QuotaPeriod)
	if m.Unified {
		out := []cgroupValue{{cpuController, "cpu.weight", strconv.FormatUint(sharesToWeight(res.CPUShares), 10)}}
		if res.CPUQuota != nil {
			quota := "max"
			if *res.CPUQuota > 0 {
				quota = strconv.FormatInt(*res.CPUQuota, 10)
			}
			out = append(out, cgroupValue{cpuController, "cpu.max", quota + " " + period})
		}
		if res.MemoryLimit != nil && *res.MemoryLimit > 0 {
			out = append(out, cgroupValue{memoryController, "memory.max", strconv.FormatInt(*res.MemoryLimit, 10)})
		}
		return out
	}
	out := []cgroupValue{{cpuController, "cpu.shares", strconv.FormatInt(res.CPUShares, 10)}}
	if res.CPUQuota != nil {
		quota := int64(-1)
		if *res.CPUQuota > 0 {
			quota = *res.CPUQuota
		}
		out = append(out, cgroupValue{cpuController, "cpu.cfs_period_us", period},
			cgroupValue{cpuController, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)})
	}
	if res.MemoryLimit != nil && *res.MemoryLimit > 0 {
		out = append(out, cgroupValue{memoryController, "memory.limit_in_bytes", strconv.FormatInt(*res.MemoryLimit, 10)})
	}
	return out
}

// sharesToWeight converts cpu.shares to the cgroup v2 cpu.weight, as runc and the kubelet do.
func sharesToWeight(shares int64) uint64 {
	if shares == 0 {
		return 0
	}
	return uint64(1 + ((shares-2)*9999)/262142)
}

// makeDir creates the pod cgroup in controller's hierarchy (v1) or the unified one (v2, enabling the
// controller in each ancestor's subtree_control) and returns its directory.
func (m *Manager) makeDir(name podrules.CgroupName, controller string) (string, error) {
	parent := m.cgroupPath(name)
	if !m.Unified {
		dir := filepath.Join(m.Root, controller, parent)
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return "", fmt.Errorf("create pod cgroup %s: %w", parent, err)
		}
		return dir, nil
	}
	dir := m.Root
	for _, part := range strings.Split(strings.Trim(filepath.ToSlash(parent), "/"), "/") {
		if err := enableController(dir, controller); err != nil {
			return "", err
		}
		dir = filepath.Join(dir, part)
		if err := m.makeCgroup(dir); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("create pod cgroup %s: %w", parent, err)
		}
	}
	return dir, nil
}

func (m *Manager) makeCgroup(dir string) error {
	if m.mkdir != nil {
		return m.mkdir(dir)
	}
	return os.Mkdir(dir, dirMode)
}

// removeCgroup removes an empty cgroup (rmdir: its control files are not files to delete).
func (m *Manager) removeCgroup(dir string) error {
	if m.rmdir != nil {
		return m.rmdir(dir)
	}
	return unix.Rmdir(dir)
}

// enableController adds controller to dir's cgroup.subtree_control unless it is there already.
func enableController(dir, controller string) error {
	file := filepath.Join(dir, subtreeControl)
	cur, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	if slices.Contains(strings.Fields(string(cur)), controller) {
		return nil
	}
	if err := os.WriteFile(file, []byte("+"+controller), 0o644); err != nil {
		return fmt.Errorf("enable %s in %s: %w", controller, file, err)
	}
	return nil
}

// underKubepods reports whether parent is a cgroup below Kubepods, with no ".." element.
func (m *Manager) underKubepods(parent string) bool {
	clean := path.Clean("/" + parent)
	return clean == parent && strings.HasPrefix(clean, path.Clean("/"+m.Kubepods)+"/")
}

// Remove deletes the pod cgroup of uid wherever it is (each QoS class, each hierarchy). A cgroup that
// still holds containers is left, and the error says so; a missing one is not an error.
func (m *Manager) Remove(uid types.UID) error {
	if !validUID(string(uid)) {
		return fmt.Errorf("invalid pod UID %q", uid)
	}
	defer m.observe(opDestroy, time.Now())
	var errs []error
	for _, class := range podrules.QoSClasses {
		name := podrules.PodCgroupName(m.kubepodsName(), class, uid)
		if m.systemd() {
			if err := m.stopSlice(context.Background(), name); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		for _, h := range m.hierarchies() {
			dir := filepath.Join(h, m.cgroupPath(name))
			if err := m.removeCgroup(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove pod cgroup %s: %w", dir, err))
			}
		}
	}
	return errors.Join(errs...)
}

// List returns the UIDs of the pod cgroups found in any hierarchy.
func (m *Manager) List() []types.UID { return m.listIn(m.hierarchies()) }

// ListMemory is List of the memory hierarchy alone on cgroup v1 (the pod cgroups are in every hierarchy; a
// pod's removal leaves one behind in another only when it fails halfway); List on v2.
func (m *Manager) ListMemory() []types.UID {
	if m.Unified {
		return m.List()
	}
	return m.listIn([]string{filepath.Join(m.Root, "memory")})
}

func (m *Manager) listIn(hierarchies []string) []types.UID {
	seen := map[types.UID]bool{}
	var out []types.UID
	for _, h := range hierarchies {
		for _, class := range podrules.QoSClasses {
			entries, _ := os.ReadDir(filepath.Join(h, m.cgroupPath(podrules.QoSCgroupName(m.kubepodsName(), class))))
			for _, e := range entries {
				uid, ok := podrules.PodUIDFromCgroup(e.Name(), m.Driver)
				if e.IsDir() && ok && validUID(uid) && !seen[types.UID(uid)] {
					seen[types.UID(uid)] = true
					out = append(out, types.UID(uid))
				}
			}
		}
	}
	return out
}

// kubepodsName is the name of the kubepods cgroup, the parent of the QoS and pod cgroups.
func (m *Manager) kubepodsName() podrules.CgroupName { return podrules.ParseCgroupfs(m.Kubepods) }

// hierarchies are the directories pod cgroups may be in: Root on v2; each mounted hierarchy on v1 (the
// runtime makes the pod cgroup in all of them).
func (m *Manager) hierarchies() []string {
	if m.Unified {
		return []string{m.Root}
	}
	entries, err := os.ReadDir(m.Root)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join(m.Root, e.Name())
		if fi, err := os.Stat(p); err == nil && fi.IsDir() && e.Type()&fs.ModeSymlink == 0 {
			out = append(out, p)
		}
	}
	return out
}

// validUID accepts what a pod UID can be and nothing that changes a path: letters, digits, '-' and '_'
// (static pod UIDs are hex hashes, API UIDs are RFC 4122 strings).
func validUID(uid string) bool {
	if uid == "" || len(uid) > 128 {
		return false
	}
	for _, r := range uid {
		if !uidRune(r) {
			return false
		}
	}
	return true
}

func uidRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
}
