package pleg

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
)

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
)

func cachedPod(states ...runtimeapi.ContainerState) *runtime.PodStatus {
	st := &runtime.PodStatus{UID: "u", Sandboxes: []*runtimeapi.PodSandboxStatus{{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY}}}
	for i, s := range states {
		st.Containers = append(st.Containers, &runtime.ContainerStatus{ID: string(rune('a' + i)), State: s})
	}
	return st
}

func relisted(states ...runtimeapi.ContainerState) map[types.UID]*RelistedPod {
	p := &RelistedPod{PodRef: PodRef{UID: "u"}, Sandboxes: []*runtimeapi.PodSandbox{{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY}}}
	for i, s := range states {
		p.Containers = append(p.Containers, &runtimeapi.Container{Id: string(rune('a' + i)), State: s})
	}
	return map[types.UID]*RelistedPod{"u": p}
}

func current(c *PodCache) bool {
	_, _, ok := c.Get("u")
	return ok
}

func TestPodCacheReadIsCurrentUnlessInvalidatedMeanwhile(t *testing.T) {
	c := NewPodCache()
	if current(c) {
		t.Fatal("an empty cache has a current entry")
	}
	gen := c.Begin("u")
	c.Put("u", cachedPod(running), gen)
	if !current(c) {
		t.Fatal("a read put back with its generation is not current")
	}

	gen = c.Begin("u")
	c.Invalidate("u") // the PLEG saw a change while the read was under way
	c.Put("u", cachedPod(running), gen)
	if current(c) {
		t.Error("a read that raced with an invalidation was taken as current")
	}

	gen = c.Begin("u")
	c.Forget("u")
	c.Put("u", cachedPod(running), gen)
	if c.Len() != 0 {
		t.Error("a read of a forgotten pod brought its entry back")
	}
}

func TestPodCacheFollowsTheRelist(t *testing.T) {
	for _, tc := range []struct {
		name     string
		relisted map[types.UID]*RelistedPod
		current  bool
	}{
		{"same containers and states", relisted(running, exited), true},
		{"a container exited", relisted(exited, exited), false},
		{"a container appeared", relisted(running, exited, running), false},
		{"a container is gone", relisted(running), false},
		{"the pod is gone", map[types.UID]*RelistedPod{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewPodCache()
			c.Put("u", cachedPod(running, exited), c.Begin("u"))
			c.reconcile(tc.relisted)
			if current(c) != tc.current {
				t.Errorf("current = %v, want %v", !tc.current, tc.current)
			}
		})
	}
	c := NewPodCache()
	c.Put("u", &runtime.PodStatus{UID: "u"}, c.Begin("u"))
	c.reconcile(map[types.UID]*RelistedPod{})
	if !current(c) {
		t.Error("a pod with nothing in the runtime yet lost its (empty) state on a relist that agrees")
	}
}

func TestPodCacheFollowsContainerEvents(t *testing.T) {
	event := func(typ runtimeapi.ContainerEventType, id string) *runtimeapi.ContainerEventResponse {
		return &runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: typ,
			PodSandboxStatus: &runtimeapi.PodSandboxStatus{Id: "sb"}}
	}
	for _, tc := range []struct {
		name    string
		event   *runtimeapi.ContainerEventResponse
		current bool
	}{
		{"started, known running", event(runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, "a"), true},
		{"created late, known running", event(runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, "a"), true},
		{"stopped, known running", event(runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, "a"), false},
		{"created, unknown", event(runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, "z"), false},
		{"deleted, known", event(runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, "a"), false},
		{"deleted, unknown", event(runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, "z"), true},
		{"sandbox", event(runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, "sb"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewPodCache()
			c.Put("u", cachedPod(running), c.Begin("u"))
			c.observe("u", tc.event)
			if current(c) != tc.current {
				t.Errorf("current = %v, want %v", !tc.current, tc.current)
			}
		})
	}
}

func TestPodCacheCopiesAreTheCallers(t *testing.T) {
	c := NewPodCache()
	c.Put("u", cachedPod(running), c.Begin("u"))
	st, _, _ := c.Get("u")
	_ = st.WithContainer(&runtime.ContainerStatus{ID: "new", State: running})
	st.Containers[0] = &runtime.ContainerStatus{ID: "replaced"}
	again, _, _ := c.Get("u")
	if len(again.Containers) != 1 || again.Containers[0].ID != "a" {
		t.Errorf("the cached state changed through a copy: %+v", again.Containers)
	}
	withSb := again.WithSandbox(&runtimeapi.PodSandboxStatus{Id: "sb2", State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.7"}})
	if withSb.Sandboxes[0].Id != "sb2" || len(withSb.Sandboxes) != 2 || withSb.IPs[0] != "10.0.0.7" || len(again.Sandboxes) != 1 {
		t.Errorf("WithSandbox: %+v (from %+v)", withSb, again)
	}
}
