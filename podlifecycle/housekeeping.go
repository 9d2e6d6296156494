package podlifecycle

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/internal/periodic"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// defaultHousekeepingPeriod is how often the agent looks for orphans (the kubelet's housekeeping period).
const defaultHousekeepingPeriod = 2 * time.Second

// housekeeping finds what no desired pod accounts for — sandboxes and containers of pods force-deleted
// from the API or left by an earlier run, and pod directories with nothing behind them — and has them
// cleaned up. Runtime orphans are handed to the Pod reconciler (by enqueuing their name), which stops
// and removes them like any pod that is no longer desired.
type housekeeping struct {
	r *Reconciler
	// lastClaimsRelease is when the claims of inactive pods were last released.
	lastClaimsRelease time.Time
	// orphansSeen are the runtime orphans counted already (kubelet_orphaned_runtime_pods_total counts each
	// once), while the runtime still has them.
	orphansSeen map[types.UID]bool
	// cgroupPasses counts the looks for orphaned pod cgroups.
	cgroupPasses int
}

// cgroupScanEvery: every so many housekeeping passes, orphaned pod cgroups are looked for in every cgroup v1
// hierarchy, not only the memory one.
const cgroupScanEvery = 30

// claimsReleasePeriod is how often the claims of pods the node no longer has are released.
const claimsReleasePeriod = time.Minute

// Start runs housekeeping every housekeeping period until ctx ends.
func (h *housekeeping) Start(ctx context.Context) error {
	return periodic.Every(ctx, h.r.clock, h.r.housekeepingPeriod, periodic.Measured(ctx, "housekeeping", h.run))
}

func (h *housekeeping) run(ctx context.Context) {
	r := h.r
	apiPods, ok := r.apiPods(ctx)
	if !ok || !r.staticSeen() {
		return // the cache or a static pod source has not been read yet
	}
	desired := r.desiredUIDs(apiPods)
	inRuntime := map[types.UID]bool{}
	if h.orphansSeen == nil {
		h.orphansSeen = map[types.UID]bool{}
	}
	for _, p := range r.pleg.PodRefs() {
		inRuntime[p.UID] = true
		if !desired[p.UID] && !r.known(p.UID) {
			if !h.orphansSeen[p.UID] {
				h.orphansSeen[p.UID] = true
				r.metrics.orphanedRuntimePods.Inc()
			}
			r.enqueue(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		}
	}
	for uid := range h.orphansSeen {
		if !inRuntime[uid] {
			delete(h.orphansSeen, uid)
		}
	}
	h.removeOrphanedDirs(ctx, desired, inRuntime)
	h.removeOrphanedCgroups(ctx, desired, inRuntime)
	r.enqueueOverwritten(ctx, apiPods)
	r.syncer.GC()
	r.states.Retain(r.known) // a state read for a pod whose worker is gone (a late hook) goes too
	active := func(uid types.UID) bool { return desired[uid] || inRuntime[uid] || r.known(uid) }
	r.alloc.RemoveOrphans(active)
	if err := r.userns.RemoveOrphans(active); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed cleaning up orphaned pod user namespaces allocations")
	}
	// Claims of pods the node no longer has are released every minute (the kubelet's DRA reconcile loop).
	if now := r.clock.Now(); now.Sub(h.lastClaimsRelease) >= claimsReleasePeriod {
		h.lastClaimsRelease = now
		if err := r.dra.UnprepareOrphans(ctx, active); err != nil {
			ctrl.LoggerFrom(ctx).Info("Unpreparing pod resources in reconcile loop failed, will retry", "err", err.Error())
		}
	}
	r.resizes.retryPending(ctx)
}

// apiPods are the API's pods in the node's cache, shared with the cache: read them, never change them
// (housekeeping runs every 2 s, and copying every pod each time is most of its cost). ok is false while
// the cache cannot answer, at once while it has never synced; standalone, there are none.
func (r *Reconciler) apiPods(ctx context.Context) (pods []corev1.Pod, ok bool) {
	if r.client == nil {
		return nil, true
	}
	if r.podsSynced != nil && !r.podsSynced() {
		return nil, false
	}
	list := &corev1.PodList{}
	lctx, cancel := context.WithTimeout(ctx, apiReadTimeout)
	defer cancel()
	if err := r.client.List(lctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, false
	}
	return list.Items, true
}

// desiredUIDs are the UIDs of the static pods and of the API's pods bound to this node.
func (r *Reconciler) desiredUIDs(apiPods []corev1.Pod) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, p := range r.static.List() {
		out[p.UID] = true
	}
	for i := range apiPods {
		if apiPods[i].Spec.NodeName == r.nodeName {
			out[apiPods[i].UID] = true
		}
	}
	return out
}

// enqueueOverwritten syncs the pods whose status someone else overwrote in the API since the agent last
// wrote it, so that the agent writes its own back (the kubelet's status manager reconciles statuses with
// the API's copies the same way): status-only updates do not trigger a sync by themselves.
func (r *Reconciler) enqueueOverwritten(ctx context.Context, apiPods []corev1.Pod) {
	for _, p := range r.statuses.Overwritten(apiPods) {
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		ctrl.LoggerFrom(ctx).V(1).Info("Pod status overwritten in the API, writing it back", "pod", key)
		r.enqueue(key)
	}
}

// known reports whether a worker tracks uid (it is being synced or torn down).
func (r *Reconciler) known(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.workers[uid]
	return ok
}

// removeOrphanedDirs removes <root>/pods/<uid> of pods that are neither desired, tracked nor in the
// runtime. Directories with something mounted below them are left for volume teardown.
func (h *housekeeping) removeOrphanedDirs(ctx context.Context, desired, inRuntime map[types.UID]bool) {
	r := h.r
	if r.rootDir == "" {
		return
	}
	entries, err := os.ReadDir(filepath.Join(r.rootDir, "pods"))
	if err != nil {
		return
	}
	for _, e := range entries {
		uid := types.UID(e.Name())
		if !e.IsDir() || desired[uid] || inRuntime[uid] || r.known(uid) {
			continue
		}
		dir, err := podconfig.PodDir(r.rootDir, uid)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Leaving a pod directory alone", "podUID", uid)
			continue
		}
		if err := r.volumes.TearDown(ctx, uid); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to tear down volumes of an orphaned pod", "podUID", uid)
			continue
		}
		if hasMounts(dir) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to remove orphaned pod directory", "podUID", uid)
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Removed orphaned pod directory", "podUID", uid)
	}
}

// hasMounts reports whether anything is mounted at or below dir.
func hasMounts(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return true // unknown: be safe
	}
	return containsMountUnder(string(b), dir)
}

func containsMountUnder(mountinfo, dir string) bool {
	for _, line := range strings.Split(mountinfo, "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && (fields[4] == dir || len(fields[4]) > len(dir) && fields[4][:len(dir)+1] == dir+"/") {
			return true
		}
	}
	return false
}

// removeOrphanedCgroups removes the pod cgroups of pods that are neither desired, tracked nor in the
// runtime (the empty cgroups the runtime leaves behind, in every hierarchy).
func (h *housekeeping) removeOrphanedCgroups(ctx context.Context, desired, inRuntime map[types.UID]bool) {
	r := h.r
	// Every pass looks in the memory hierarchy, every cgroupScanEvery-th in all of them (cgroup v1 has a dozen:
	// reading them all every 2 s was most of an idle node's housekeeping).
	list := r.podCgroups.List
	if q, ok := r.podCgroups.(interface{ ListMemory() []types.UID }); ok && h.cgroupPasses%cgroupScanEvery != 0 {
		list = q.ListMemory
	}
	h.cgroupPasses++
	for _, uid := range list() {
		if desired[uid] || inRuntime[uid] || r.known(uid) {
			continue
		}
		if err := r.podCgroups.Remove(uid); err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Orphaned pod cgroup not removed", "podUID", uid, "err", err.Error())
		}
	}
}
