package podrules

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Cgroup drivers (KubeletConfiguration cgroupDriver).
const (
	CgroupDriverCgroupfs = "cgroupfs"
	CgroupDriverSystemd  = "systemd"
)

// Kubelet cgroup name components.
const (
	KubepodsCgroup  = "kubepods"
	PodCgroupPrefix = "pod"
	// SystemdSliceSuffix ends every slice unit's name.
	SystemdSliceSuffix = ".slice"
	// SystemdRootSlice is the root slice, the parent of the top-level slices.
	SystemdRootSlice = "-.slice"
)

// CgroupName is a cgroup as the kubelet names it (its CgroupName): the components below the root, driver
// independent. ToCgroupfs and ToSystemd give its path in each driver's layout.
type CgroupName []string

// ParseCgroupfs splits a cgroupfs path into its components ("/" and "" have none).
func ParseCgroupfs(p string) CgroupName {
	p = strings.Trim(path.Clean("/"+p), "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// Child is n with more components below it (n itself is not changed).
func (n CgroupName) Child(components ...string) CgroupName {
	out := make(CgroupName, 0, len(n)+len(components))
	return append(append(out, n...), components...)
}

// HasPrefix reports whether n is p or below it.
func (n CgroupName) HasPrefix(p CgroupName) bool {
	if len(n) < len(p) {
		return false
	}
	for i := range p {
		if n[i] != p[i] {
			return false
		}
	}
	return true
}

// ToCgroupfs is n as a cgroupfs path: "/" + the components joined by '/'.
func (n CgroupName) ToCgroupfs() string { return "/" + path.Join(n...) }

// ToSystemd is n as the systemd driver lays it out: each component's '-' becomes '_', the components are
// joined with '-' into a slice name, and the slice expands to its parents' paths
// (["kubepods","burstable","pod1-2"] → /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice).
func (n CgroupName) ToSystemd() string {
	if len(n) == 0 {
		return "/"
	}
	var p, prefix string
	for _, part := range n {
		part = strings.ReplaceAll(part, "-", "_")
		p += "/" + prefix + part + SystemdSliceSuffix
		prefix += part + "-"
	}
	return p
}

// SystemdUnit is the slice unit of n with the systemd driver, and the slice it is in (SystemdRootSlice at
// the top).
func (n CgroupName) SystemdUnit() (unit, parent string) {
	if len(n) == 0 {
		return SystemdRootSlice, ""
	}
	parent = SystemdRootSlice
	if len(n) > 1 {
		parent = path.Base(n[:len(n)-1].ToSystemd())
	}
	return path.Base(n.ToSystemd()), parent
}

// Path is n's path with driver (systemd or cgroupfs, the default).
func (n CgroupName) Path(driver string) string {
	if driver == CgroupDriverSystemd {
		return n.ToSystemd()
	}
	return n.ToCgroupfs()
}

// KubepodsCgroupName is the kubepods cgroup below cgroupRoot (a cgroupfs path, "" or "/" for the root):
// the cgroup every pod's cgroup is in.
func KubepodsCgroupName(cgroupRoot string) CgroupName {
	return ParseCgroupfs(cgroupRoot).Child(KubepodsCgroup)
}

// QoSClasses are the QoS classes, each with its cgroup below kubepods (QoSCgroupName).
var QoSClasses = []corev1.PodQOSClass{corev1.PodQOSGuaranteed, corev1.PodQOSBurstable, corev1.PodQOSBestEffort}

// QoSCgroupName is the cgroup of the pods of QoS class class, as the kubelet's QoS container manager names it:
// kubepods/burstable, kubepods/besteffort, and kubepods itself for Guaranteed pods (and any other class).
func QoSCgroupName(kubepods CgroupName, class corev1.PodQOSClass) CgroupName {
	switch class {
	case corev1.PodQOSBurstable, corev1.PodQOSBestEffort:
		return kubepods.Child(strings.ToLower(string(class)))
	}
	return kubepods
}

// PodCgroupName is a pod's cgroup as the kubelet names it, from the pod's QoS class (GetPodQOS) and UID:
// <kubepods>[/burstable|/besteffort]/pod<uid>. Its path with each driver is Path's (with systemd
// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with '_' for '-'>.slice).
func PodCgroupName(kubepods CgroupName, class corev1.PodQOSClass, uid types.UID) CgroupName {
	return QoSCgroupName(kubepods, class).Child(PodCgroupChild(string(uid)))
}

// PodCgroupChild is the last component of a pod's cgroup name (PodCgroupName): "pod" + its UID.
func PodCgroupChild(uid string) string { return PodCgroupPrefix + uid }

// PodUIDFromCgroup is the UID a pod cgroup's directory name (the last element of its path with driver)
// stands for, and whether it is a pod cgroup's name at all.
func PodUIDFromCgroup(dirName, driver string) (string, bool) {
	if driver != CgroupDriverSystemd {
		return strings.CutPrefix(dirName, PodCgroupPrefix)
	}
	slice, ok := strings.CutSuffix(dirName, SystemdSliceSuffix)
	if !ok {
		return "", false
	}
	i := strings.LastIndex(slice, "-"+PodCgroupPrefix)
	if i < 0 {
		return "", false
	}
	return strings.ReplaceAll(slice[i+1+len(PodCgroupPrefix):], "_", "-"), true
}
