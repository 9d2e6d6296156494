package pleg

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
)

// PodCache holds the last runtime state read for each pod, as the kubelet's PLEG cache does, so that a
// pod worker reads the runtime only when the pod changed there. An entry is current until the PLEG sees
// the runtime disagree with it (a relist whose sandboxes and containers, with their states, differ from the
// entry's, or a container event the entry does not show) or until Invalidate. Readers that change the
// pod themselves put back what their actions left (Put), so their own changes cost no full read.
//
// Every change of an entry's validity takes a new generation. A read begins with Begin and ends with Put of
// the generation it began with: if anything invalidated the pod meanwhile, the result is kept but not
// current, so a read that raced with a change is never taken for the truth.
type PodCache struct {
	mu      sync.Mutex
	next    uint64
	entries map[types.UID]*podCacheEntry
}

type podCacheEntry struct {
	status *runtime.PodStatus
	gen    uint64
	valid  bool
}

// NewPodCache returns an empty cache.
func NewPodCache() *PodCache {
	return &PodCache{entries: map[types.UID]*podCacheEntry{}}
}

// Get returns a copy of the pod's state and its generation when the entry is current. The copy's slices
// are the caller's; the sandbox and container statuses they point to are shared and must not be modified.
func (c *PodCache) Get(uid types.UID) (*runtime.PodStatus, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[uid]
	if e == nil || !e.valid || e.status == nil {
		return nil, 0, false
	}
	return e.status.ShallowCopy(), e.gen, true
}

// Begin returns the generation a read of the pod that starts now passes to Put.
func (c *PodCache) Begin(uid types.UID) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entry(uid).gen
}

// Put stores st as the pod's state, read (or derived from a read) since gen. It is current only when
// nothing invalidated the pod since then.
func (c *PodCache) Put(uid types.UID, st *runtime.PodStatus, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[uid]
	if e == nil || e.gen != gen {
		return // forgotten or invalidated since the read began: the next reader reads again
	}
	e.status, e.valid = st.ShallowCopy(), true
}

// Invalidate makes the next reader of the pod read the runtime.
func (c *PodCache) Invalidate(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invalidate(c.entries[uid])
}

// Forget drops the pod's entry (its worker is gone).
func (c *PodCache) Forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, uid)
}

// Retain drops the entries of the pods keep says no.
func (c *PodCache) Retain(keep func(types.UID) bool) {
	c.mu.Lock()
	uids := make([]types.UID, 0, len(c.entries))
	for uid := range c.entries {
		uids = append(uids, uid)
	}
	c.mu.Unlock()
	for _, uid := range uids {
		if !keep(uid) {
			c.Forget(uid)
		}
	}
}

// Len returns the number of entries.
func (c *PodCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

func (c *PodCache) entry(uid types.UID) *podCacheEntry {
	e := c.entries[uid]
	if e == nil {
		c.next++
		e = &podCacheEntry{gen: c.next}
		c.entries[uid] = e
	}
	return e
}

func (c *PodCache) invalidate(e *podCacheEntry) {
	if e == nil {
		return
	}
	c.next++
	e.gen, e.valid, e.status = c.next, false, nil
}

// reconcile invalidates every entry the relist disagrees with. It runs before the relist's events are
// emitted, so a worker woken by an event never reads a state older than the relist.
func (c *PodCache) reconcile(relisted map[types.UID]*RelistedPod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, e := range c.entries {
		if !e.valid || !relisted[uid].agrees(e.status) {
			c.invalidate(e)
		}
	}
}

// observe invalidates the pod's entry unless it already shows what a container event says.
func (c *PodCache) observe(uid types.UID, resp *runtimeapi.ContainerEventResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[uid]
	if e == nil || !e.valid || !shows(e.status, resp) {
		c.invalidate(e)
	}
}

// agrees reports whether st holds exactly the relisted sandboxes and containers, in the same states (a nil
// pod is a pod the runtime holds nothing for).
func (p *RelistedPod) agrees(st *runtime.PodStatus) bool {
	var sandboxes []*runtimeapi.PodSandbox
	var containers []*runtimeapi.Container
	if p != nil {
		sandboxes, containers = p.Sandboxes, p.Containers
	}
	if len(sandboxes) != len(st.Sandboxes) || len(containers) != len(st.Containers) {
		return false
	}
	for _, sb := range sandboxes {
		if !slices.ContainsFunc(st.Sandboxes, func(s *runtimeapi.PodSandboxStatus) bool {
			return s.GetId() == sb.GetId() && s.GetState() == sb.GetState()
		}) {
			return false
		}
	}
	for _, ctr := range containers {
		if !slices.ContainsFunc(st.Containers, func(s *runtime.ContainerStatus) bool {
			return s.ID == ctr.GetId() && s.State == ctr.GetState()
		}) {
			return false
		}
	}
	return true
}

// shows reports whether st already reflects a container event: the container exists in a state at or past
// the event's (a late "created" for a running container changes nothing), or is gone for a deletion.
// Sandbox events are never assumed to be known.
func shows(st *runtime.PodStatus, resp *runtimeapi.ContainerEventResponse) bool {
	id := resp.GetContainerId()
	if id == resp.GetPodSandboxStatus().GetId() {
		return false
	}
	var state runtimeapi.ContainerState
	found := false
	for _, c := range st.Containers {
		if c.ID == id {
			state, found = c.State, true
		}
	}
	switch resp.GetContainerEventType() {
	case runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT:
		return found
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		return found && (state == runtimeapi.ContainerState_CONTAINER_RUNNING || state == runtimeapi.ContainerState_CONTAINER_EXITED)
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		return found && state == runtimeapi.ContainerState_CONTAINER_EXITED
	case runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
		return !found
	default:
		return false
	}
}
