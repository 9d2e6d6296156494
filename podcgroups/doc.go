// Package podcgroups makes the part of the kubelet's pod cgroups that nodelet enforces: the pod cgroup
// named by the sandbox's cgroup_parent (<cgroupRoot>/kubepods[/burstable|/besteffort]/pod<uid>, cgroupfs
// driver) with pids.max set to podPidsLimit, created before the sandbox runs, and removed once the pod's
// sandboxes and containers are gone (with the empty pod cgroups the runtime leaves in every hierarchy).
//
// It writes only below the kubepods cgroup of the cgroup filesystem. It must not call the CRI or the API
// server; the caller says which pods exist.
package podcgroups
