// Package containergc is the kubelet's container garbage collector (pkg/kubelet/kuberuntime/kuberuntime_gc.go,
// pkg/kubelet/container/container_gc.go and the container half of Kubelet.StartGarbageCollection, kubelet
// v1.37).
//
// Every GCPeriod (1 minute, the kubelet's ContainerGCPeriod, not configurable there either) the Collector
//
//   - groups the runtime's dead containers — every container of a pod (one carrying the pod UID label)
//     that is not running and was created at least Policy.MinAge ago — into evict units by pod UID and
//     container name, newest first;
//   - once every pod source has been read (the kubelet's allSourcesReady), removes every dead container
//     of a pod that is gone: neither desired (a static pod, or an API pod bound to the node) nor tracked by
//     a pod worker (the kubelet's ShouldPodContentBeRemoved);
//   - keeps at most Policy.MaxPerPodContainer dead containers per unit (negative: no limit), removing the
//     oldest;
//   - with Policy.MaxContainers >= 0 and more dead containers than that, keeps MaxContainers / units (at
//     least 1) per unit, then removes the oldest of all until MaxContainers are left;
//   - removes the sandboxes that are not ready and hold no container: all of them for a gone pod, all but
//     the newest for another;
//   - once every source has been read, removes the log directories <podLogsDir>/<ns>_<name>_<uid> of gone
//     pods, and the dangling legacy log symlinks in /var/log/containers.
//
// A container is removed with its logs, as the kubelet's removeContainer: its log file (the runtime's
// ContainerStatus.LogPath, else <podLogsDir>/<ns>_<name>_<uid>/<container>/<restartCount>.log) and the
// rotated files next to it, then its legacy symlink, then the container; a container whose logs cannot be
// removed is kept for the next pass. A container in an unknown state is stopped first, with its pod's
// grace period (at least 2 s) — without the preStop hook the kubelet would run. A sandbox is stopped, then
// removed.
//
// What is never removed, whatever the policy: a running container; a ready sandbox, a sandbox that still
// holds a container, and the newest sandbox of a pod that is not gone; anything of a pod a worker is
// terminating or removing (PodsForGC's busy pods: the worker removes it all itself); anything of a pod
// not known to be gone before every source has been read; and, of a pod that is not gone, the newest
// container of each unit and its newest exited container — the attempt whose annotation carries the
// restart count and whose termination is the status's lastState and `kubectl logs --previous`. So
// MaxPerPodContainer 0 keeps those, as the kubelet's pod container deletor keeps at least one, and
// MaxContainers cannot go below one container per unit (the kubelet's last step may remove the newest of
// a unit). Files are only ever removed below podLogsDir (log files, checked with podrules.InsideDir) and,
// as symlinks, in the legacy directory; every name built from an identifier goes through
// podrules.PathSegment or the runtime package's pod log path helpers.
//
// A pass that fails (a runtime or the log directory cannot be listed) is logged and recorded as a
// ContainerGCFailed Warning event on the Node, as by the kubelet; failures to remove one container or
// sandbox are only logged. The kubelet has no metric for container garbage collection, nor has the
// Collector.
//
// The package talks to the runtime through the consumer-side Runtime interface (a *runtime.Client
// satisfies it) and to the pod workers through Pods (a *podlifecycle.Reconciler satisfies it), on an
// injected clock, so tests run on fakes and a fake clock.
package containergc
