package containergc

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
)

// deadContainer is a container the Collector may remove: a pod's, not running, old enough.
type deadContainer struct {
	c       *runtimeapi.Container
	uid     types.UID
	name    string
	created time.Time
	// keep: the newest container of its unit or its newest exited one, never removed while the pod is
	// not gone.
	keep bool
}

func (d deadContainer) id() string { return d.c.GetId() }

// unit is the kubelet's evictUnit: a pod UID and a container name.
type unit struct {
	uid  types.UID
	name string
}

// units are the dead containers by unit, each newest first.
type units map[unit][]deadContainer

func (u units) count() int {
	n := 0
	for _, cs := range u {
		n += len(cs)
	}
	return n
}

// sortedKeys are the units in a fixed order, so that a pass removes in the same order every time.
func (u units) sortedKeys() []unit {
	keys := make([]unit, 0, len(u))
	for k := range u {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b unit) int {
		return cmp.Or(strings.Compare(string(a.uid), string(b.uid)), strings.Compare(a.name, b.name))
	})
	return keys
}

// newestFirst orders containers by creation, newest first (ties by ID, for a fixed order).
func newestFirst(a, b deadContainer) int {
	return cmp.Or(b.created.Compare(a.created), strings.Compare(a.id(), b.id()))
}

// evictableUnits groups the pods' containers that are not running and were created at or before
// newestGCTime, by unit, newest first (the kubelet's evictableContainers). Containers without a pod UID
// label are not a pod's, and busy pods' are left to their workers: neither is grouped.
func evictableUnits(all []*runtimeapi.Container, newestGCTime time.Time, v view) units {
	u := units{}
	for _, c := range all {
		uid := runtime.PodUIDOf(c.GetLabels())
		name := c.GetMetadata().GetName()
		if name == "" {
			name = c.GetLabels()[runtime.LabelContainerName]
		}
		created := time.Unix(0, c.GetCreatedAt())
		if uid == "" || name == "" || c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING ||
			created.After(newestGCTime) || v.state(uid) == podBusy {
			continue
		}
		k := unit{uid: uid, name: name}
		u[k] = append(u[k], deadContainer{c: c, uid: uid, name: name, created: created})
	}
	for k, cs := range u {
		slices.SortFunc(cs, newestFirst)
		exitedKept := false
		for i := range cs {
			exited := cs[i].c.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED
			cs[i].keep = i == 0 || exited && !exitedKept
			exitedKept = exitedKept || exited
		}
		u[k] = cs
	}
	return u
}

// selectContainers returns the dead containers to remove, in the order to remove them (the kubelet's
// evictContainers): every one of the gone pods', then the oldest beyond MaxPerPodContainer per unit, then
// beyond MaxContainers. Containers marked keep are never selected.
func selectContainers(all []*runtimeapi.Container, now time.Time, p Policy, v view) []deadContainer {
	u := evictableUnits(all, now.Add(-p.MinAge), v)
	var out []deadContainer
	if v.ready {
		for _, k := range u.sortedKeys() {
			if v.state(k.uid) == podGone {
				out = append(out, oldestFirst(u[k])...)
				delete(u, k)
			}
		}
	}
	if p.MaxPerPodContainer >= 0 {
		out = append(out, u.enforcePerUnit(p.MaxPerPodContainer)...)
	}
	if p.MaxContainers < 0 || u.count() <= p.MaxContainers {
		return out
	}
	// Leave an equal number of containers per unit (at least one), then the newest of all.
	out = append(out, u.enforcePerUnit(max(p.MaxContainers/len(u), 1))...)
	return append(out, u.enforceTotal(p.MaxContainers)...)
}

// enforcePerUnit leaves at most limit containers in each unit (and those marked keep), returning the
// others, each unit's oldest first.
func (u units) enforcePerUnit(limit int) []deadContainer {
	var out []deadContainer
	for _, k := range u.sortedKeys() {
		var kept, removed []deadContainer
		for _, d := range u[k] {
			if d.keep || len(kept) < limit {
				kept = append(kept, d)
			} else {
				removed = append(removed, d)
			}
		}
		u[k] = kept
		out = append(out, oldestFirst(removed)...)
	}
	return out
}

// enforceTotal removes the oldest containers of all units, but those marked keep, until at most limit are
// left or only kept ones.
func (u units) enforceTotal(limit int) []deadContainer {
	var candidates []deadContainer
	for _, k := range u.sortedKeys() {
		for _, d := range u[k] {
			if !d.keep {
				candidates = append(candidates, d)
			}
		}
	}
	n := min(u.count()-limit, len(candidates))
	if n <= 0 {
		return nil
	}
	slices.SortFunc(candidates, newestFirst)
	removed := oldestFirst(candidates[len(candidates)-n:])
	gone := map[string]bool{}
	for _, d := range removed {
		gone[d.id()] = true
	}
	for k, cs := range u {
		u[k] = slices.DeleteFunc(cs, func(d deadContainer) bool { return gone[d.id()] })
	}
	return removed
}

// oldestFirst is a copy of newest-first containers in the order the kubelet removes them.
func oldestFirst(cs []deadContainer) []deadContainer {
	out := slices.Clone(cs)
	slices.Reverse(out)
	return out
}

// deadSandbox is a sandbox the Collector may remove.
type deadSandbox struct {
	id      string
	uid     types.UID
	created time.Time
	// active: ready, or still holding a container.
	active bool
}

// selectSandboxes returns the IDs of the sandboxes to remove (the kubelet's evictSandboxes): of a gone
// pod every one that is not active, of another pod every one that is neither active nor the newest. A
// busy pod's are left to its worker; sandboxes without a pod UID label are not a pod's.
func selectSandboxes(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container, v view) []string {
	holding := map[string]bool{}
	for _, c := range containers {
		holding[c.GetPodSandboxId()] = true
	}
	byPod := map[types.UID][]deadSandbox{}
	for _, s := range sandboxes {
		uid := runtime.PodUIDOf(s.GetLabels())
		if uid == "" || v.state(uid) == podBusy {
			continue
		}
		byPod[uid] = append(byPod[uid], deadSandbox{id: s.GetId(), uid: uid, created: time.Unix(0, s.GetCreatedAt()),
			active: s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY || holding[s.GetId()]})
	}
	uids := make([]types.UID, 0, len(byPod))
	for uid := range byPod {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	var out []string
	for _, uid := range uids {
		sbs := byPod[uid]
		slices.SortFunc(sbs, func(a, b deadSandbox) int {
			return cmp.Or(b.created.Compare(a.created), strings.Compare(a.id, b.id))
		})
		keep := 1
		if v.state(uid) == podGone {
			keep = 0
		}
		for i := len(sbs) - 1; i >= keep; i-- {
			if !sbs[i].active {
				out = append(out, sbs[i].id)
			}
		}
	}
	return out
}
