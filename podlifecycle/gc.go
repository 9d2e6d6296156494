package podlifecycle

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
)

// PodsForGC tells the container garbage collector (containergc) which pods the node still has: every
// desired pod — a static pod, or an API pod bound to the node — and every pod a worker tracks, each
// mapped to whether it is busy: a worker is terminating it, or removing what it left (its pod is being
// deleted or no longer desired), and nothing of it may be removed by anyone else meanwhile. A pod the map
// does not name is gone: its dead containers, sandboxes and logs are garbage.
//
// sourcesReady is false until the API's pods (the node's cache) and every static pod source have been
// read (the kubelet's allSourcesReady): the map then holds the tracked pods only, and a pod it does not
// name may yet be desired. Together they are the kubelet's pod workers' ShouldPodContentBeRemoved.
//
// The answer is a snapshot: a collector must list what it may remove before it asks, so that whatever a
// worker creates meanwhile belongs to a pod the snapshot names.
func (r *Reconciler) PodsForGC(ctx context.Context) (pods map[types.UID]bool, sourcesReady bool) {
	apiPods, ok := r.apiPods(ctx)
	sourcesReady = ok && r.staticSeen()
	var desired map[types.UID]bool
	if sourcesReady {
		desired = r.desiredUIDs(apiPods)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	pods = make(map[types.UID]bool, len(desired)+len(r.workers))
	for uid := range desired {
		pods[uid] = false
	}
	for uid, w := range r.workers {
		pods[uid] = w.busyForGC(sourcesReady && !desired[uid])
	}
	return pods, sourcesReady
}

// busyForGC reports whether the worker is terminating its pod or removing what the pod left: terminating;
// tracked only from the runtime (a pod left by an earlier run, or force-deleted, which the worker stops
// and removes); or its pod is being deleted or is no longer desired (undesired). Called under the
// reconciler's mu (w.pod).
func (w *podWorker) busyForGC(undesired bool) bool {
	switch {
	case w.stage() == terminating || w.pod == nil || undesired:
		return true
	case w.stage() == terminated:
		return w.pod.DeletionTimestamp != nil
	}
	return false
}
