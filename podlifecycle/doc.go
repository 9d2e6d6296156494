// Package podlifecycle runs the pods bound to this node: the kubelet's pod workers, on controller-runtime.
// Reconciler is built by New from its dependencies (Deps) and settings (Options); Run drives it from the
// API's pods, the static pod store, the PLEG and the completions of background work.
//
// A pod UID's worker (worker.go) is its state machine, syncing → terminating → terminated: it admits the pod
// on its first sync (admission.go, sysctls.go), then asks the pod syncer (podsyncer) for SyncPod while the
// pod runs, SyncTerminatingPod until its containers have stopped, and SyncTerminatedPod; it sets the status
// computed from what the sync left with the status manager (finish.go: the one status write) and, for a
// deleted pod, removes the API object once its final status is written. The files:
//
//   - reconciler.go: the Reconciler, Run, Reconcile (every UID under one name: old ones stopped first);
//   - worker.go: the worker, its stage, the step of one sync, activeDeadlineSeconds, admission on first sync;
//   - finish.go: the status write, orphans (UIDs no longer desired) and the removal of deleted pods;
//   - evict.go: KillPod and the active pods, for the eviction manager; gc.go: what the container garbage
//     collector may remove;
//   - housekeeping.go: orphaned runtime pods, directories and cgroups.
//
// The reconciler reaches the runtime, volumes and probes only through the syncer and the small interfaces
// declared in deps.go; time comes from the injected clock, so tests drive it.
package podlifecycle
