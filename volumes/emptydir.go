package volumes

import (
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/podrules"
)

const (
	emptyDirPerm   os.FileMode = 0o777 // the kubelet's emptyDir mode
	volumesDirPerm os.FileMode = 0o750 // the pod's volumes/ and plugin directories
)

// setUpEmptyDir creates the pod's emptyDir once: a directory on disk, or a tmpfs for medium Memory
// (size: the smallest of sizeLimit, the pod's memory limit and the node's allocatable memory). It
// lives as long as the pod, so containers restarting find their data. fsGroup ownership is applied
// when it is created.
func (m sourceVolumes) setUpEmptyDir(pod *corev1.Pod, name string, src *corev1.EmptyDirVolumeSource) error {
	dir, err := m.volumeDir(pod.UID, pluginEmptyDir, name)
	if err != nil {
		return err
	}
	var created bool
	switch src.Medium {
	case corev1.StorageMediumDefault:
		created, err = ensureDir(dir, emptyDirMode(src))
	case corev1.StorageMediumMemory:
		created, err = m.srcv().ensureTmpfs(dir, func() int64 { return m.srcv().memorySize(pod, src.SizeLimit) })
	default:
		return fmt.Errorf("emptyDir medium %q is not supported", src.Medium)
	}
	if err != nil || !created {
		return err
	}
	return applyFSGroup(dir, pod)
}

// applyFSGroup gives a writable volume just made the pod's fsGroup, with its fsGroupChangePolicy.
func applyFSGroup(dir string, pod *corev1.Pod) error {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return nil
	}
	return setVolumeOwnership(dir, sc.FSGroup, sc.FSGroupChangePolicy, false)
}

func emptyDirMode(src *corev1.EmptyDirVolumeSource) os.FileMode {
	if src.Mode != nil {
		return os.FileMode(*src.Mode) & os.ModePerm
	}
	return emptyDirPerm
}

// ensureDir creates dir with mode perm (whatever the umask) unless it exists, and says whether it
// created it. An existing directory is left as the pod's containers made it.
func ensureDir(dir string, perm os.FileMode) (bool, error) {
	if _, err := os.Stat(dir); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), volumesDirPerm); err != nil {
		return false, err
	}
	if err := os.Mkdir(dir, perm); err != nil && !os.IsExist(err) {
		return false, err
	}
	return true, os.Chmod(dir, perm)
}

// ensureTmpfs makes dir a tmpfs mount point of size() bytes unless it is one (size is not asked then), and
// says whether it mounted it.
func (m sourceVolumes) ensureTmpfs(dir string, size func() int64) (bool, error) {
	if _, err := ensureDir(dir, emptyDirPerm); err != nil {
		return false, err
	}
	mounted, err := m.mounter().IsMountPoint(dir)
	if err != nil || mounted {
		return false, err
	}
	if err := m.mounter().MountTmpfs(dir, size()); err != nil {
		return false, fmt.Errorf("mount tmpfs at %s: %w", dir, err)
	}
	return true, nil
}

// memorySize is the size of a memory-backed volume, as the kubelet computes it: the node's allocatable
// memory, lowered to the pod's memory limit and then to sizeLimit when those are positive and smaller.
// 0 means no size option (the kernel's default, half of RAM).
func (m sourceVolumes) memorySize(pod *corev1.Pod, sizeLimit *resource.Quantity) int64 {
	size := int64(0)
	if q, ok := m.allocatable()[corev1.ResourceMemory]; ok {
		size = q.Value()
	}
	size = lowerTo(size, podMemoryLimit(pod))
	if sizeLimit != nil {
		size = lowerTo(size, sizeLimit.Value())
	}
	return size
}

// lowerTo returns limit when it is positive and below size (or size is unbounded).
func lowerTo(size, limit int64) int64 {
	if limit > 0 && (size == 0 || limit < size) {
		return limit
	}
	return size
}

// podMemoryLimit is the memory limit of the pod's cgroup (the kubelet sizes memory-backed volumes by the same
// ResourceConfigForPod it gives the cgroup); 0: none.
func podMemoryLimit(pod *corev1.Pod) int64 {
	if l := podrules.PodCgroupResources(pod, podrules.GetPodQOS(pod)).MemoryLimit; l != nil {
		return *l
	}
	return 0
}
