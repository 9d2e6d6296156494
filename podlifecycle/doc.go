// Package podlifecycle runs the pods bound to this node: the kubelet's pod workers and its SyncPod,
// SyncTerminatingPod and SyncTerminatedPod, on controller-runtime. Reconciler is built by New from its
// dependencies (Deps) and settings (Options); Run drives it from the API's pods, the static pod store,
// the PLEG and the completions of its own background work.
//
// The files follow the phases of a pod:
//
//   - worker: reconciler.go (the Reconciler, Run, Reconcile) and worker.go (a pod UID's worker, the
//     state machine syncing → terminating → terminated);
//   - sync: sync.go (SyncPod: sandbox, containers, volumes), actions.go and actions_reset.go (what a sync
//     must do, from the spec and the runtime's state), admission.go and sysctls.go (admission),
//     cgroups.go (pod cgroups) and service_env.go (service environment variables);
//   - terminate: terminate.go (SyncTerminatingPod/SyncTerminatedPod), stop_order.go (sidecars last) and
//     hooks.go (postStart and preStop hooks);
//   - status: status_writer.go (the pod's status, written to the API or its mirror pod);
//   - images: images.go (background pulls, back-off) and pull_credentials.go (imagePullSecrets);
//   - housekeeping.go: orphaned pods, directories and cgroups.
//
// The reconciler reaches the container runtime only through the small interfaces declared in deps.go,
// which the runtime package implements; time comes from the injected clock, so tests drive it.
package podlifecycle
