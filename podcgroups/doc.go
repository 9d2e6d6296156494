// Package podcgroups is the part of the kubelet's container manager that nodelet enforces: the pod cgroup
// named by the sandbox's cgroup_parent (<cgroupRoot>/kubepods[/burstable|/besteffort]/pod<uid> with the cgroupfs
// driver; the kubelet's slices kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice with the
// systemd driver, made through systemd over D-Bus as runc's systemd driver makes them) with the kubelet's values — cpu shares, CFS quota and period, memory limit and
// huge page limits (every host page size: the pod's requests, else 0) from podrules.PodCgroupResources (cpu.weight,
// cpu.max, memory.max, hugetlb.<size>.max on cgroup v2), pids.max from podPidsLimit —
// created before the sandbox runs, and removed once the pod's sandboxes and containers are gone (with the
// empty pod cgroups the runtime leaves in every hierarchy). The QoS cgroups get the kubelet's cpu values
// (UpdateQoS); kubepods gets the node's capacity or allocatable at start (EnsureKubepods). Operations are
// timed in kubelet_cgroup_manager_duration_seconds.
//
// It writes only below the kubepods cgroup of the cgroup filesystem (and asks systemd only for slices there).
// It must not call the CRI or the API server; the caller says which pods exist.
package podcgroups
