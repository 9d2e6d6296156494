package podcgroups

import (
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
)

// Kubepods are the values of the kubepods cgroup: what the node gives all its pods together.
type Kubepods struct {
	// MilliCPU becomes cpu.shares (cpu.weight on v2); MemoryBytes memory.limit_in_bytes (memory.max);
	// Pids, when positive, pids.max.
	MilliCPU, MemoryBytes, Pids int64
	// HugePages are the bytes of huge pages by page size in bytes that pods may use (the node's pre-allocated
	// pages): each of the Manager's HugePageSizes gets its hugetlb limit from it, 0 for a size it lacks, until
	// UpdateQoS lifts it as the kubelet's QoS manager does.
	HugePages map[int64]int64
}

// KubepodsValues are the kubelet's kubepods values (its enforceNodeAllocatableCgroups): the node's
// capacity, or with enforceNodeAllocatable "pods" its capacity less systemReserved and kubeReserved (the
// hard eviction thresholds are not taken off: the eviction manager keeps that margin).
func KubepodsValues(capacityMilliCPU, capacityMemory, capacityPids int64, enforcePods bool, reservedMilliCPU, reservedMemory, reservedPids int64) Kubepods {
	k := Kubepods{MilliCPU: capacityMilliCPU, MemoryBytes: capacityMemory, Pids: capacityPids}
	if enforcePods {
		k.MilliCPU = max(k.MilliCPU-reservedMilliCPU, 0)
		k.MemoryBytes = max(k.MemoryBytes-reservedMemory, 0)
		k.Pids = max(k.Pids-reservedPids, 0)
	}
	return k
}

// EnsureKubepods makes the kubepods cgroup with the given values, as the kubelet does at start: cpu shares
// so that pods together weigh what the node's cpus do, the memory limit, the pids limit and the huge page
// limits.
func (m *Manager) EnsureKubepods(k Kubepods) error {
	defer m.observe(opUpdate, time.Now())
	shares := podrules.MilliCPUToShares(k.MilliCPU)
	values := []cgroupValue{{cpuController, "cpu.shares", strconv.FormatInt(shares, 10)}}
	memFile, pidsFile := "memory.limit_in_bytes", pidsMax
	if m.Unified {
		values = []cgroupValue{{cpuController, "cpu.weight", strconv.FormatUint(sharesToWeight(shares), 10)}}
		memFile = "memory.max"
	}
	if k.MemoryBytes > 0 {
		values = append(values, cgroupValue{memoryController, memFile, strconv.FormatInt(k.MemoryBytes, 10)})
	}
	if k.Pids > 0 {
		values = append(values, cgroupValue{pidsController, pidsFile, strconv.FormatInt(k.Pids, 10)})
	}
	values = append(values, m.hugetlbValues(limitOf(k.HugePages))...)
	return m.write(path.Join("/", m.Kubepods), values)
}

// Processes is the number of processes and threads in the pod cgroup of uid (pids.current), as cAdvisor
// reports a pod's process count to the kubelet; false when the pod has no pids cgroup.
func (m *Manager) Processes(uid types.UID) (uint64, bool) {
	if !validUID(string(uid)) {
		return 0, false
	}
	root := filepath.Join(m.Root, pidsController)
	if m.Unified {
		root = m.Root
	}
	for _, class := range podrules.QoSClasses {
		name := podrules.PodCgroupName(m.kubepodsName(), class, uid)
		b, err := os.ReadFile(filepath.Join(root, m.cgroupPath(name), "pids.current"))
		if err != nil {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}
