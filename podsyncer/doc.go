// Package podsyncer is the kubelet's pod syncer: SyncPod, SyncTerminatingPod and SyncTerminatedPod. The
// pod workers (podlifecycle) decide when a pod syncs and where it is in its life; the syncer does one sync
// of one pod, on a Scope (the pod, the syncer's memory of it, its runtime state), split into phases that
// return what they did (Result). No phase writes the API: the worker sets the pod's status, computed by
// PodStatus from what the sync left, with the status manager, the one writer of pod status.
//
// The files follow the phases of a pod:
//
//   - sync: sync.go (SyncPod: actions, sandbox, volumes, starts), actions.go and actions_reset.go (what a
//     sync must do, from the spec and the runtime's state; pure), cgroups.go (pod cgroups),
//     service_env.go (service environment variables), images.go, imagevolumes.go and
//     pull_credentials.go (background pulls, back-off, imagePullSecrets), backoff.go;
//   - terminate: terminate.go (SyncTerminatingPod, SyncTerminatedPod, RemovePod), stop_order.go (sidecars
//     last) and hooks.go (postStart and preStop hooks);
//   - status: status.go (PodStatus, from the runtime state and the syncer's memory of the pod);
//   - runtimestate.go: a pod's runtime state from the PLEG's cache or one runtime read.
//
// The syncer reaches the runtime, volumes, probes and cgroups only through the small interfaces of
// syncer.go; time comes from the injected clock, so tests drive it.
package podsyncer
