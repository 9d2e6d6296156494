package containergc

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// On a container's death the deletor removes, at once and whatever their age, the exited containers of the
// same pod and name beyond the newest one; other containers of the pod, other pods' and the running
// attempt stay. A pod its worker is terminating is left alone.
func TestPodContainerDeletor(t *testing.T) {
	h := newHarness(t, Policy{MinAge: time.Hour, MaxPerPodContainer: 1, MaxContainers: -1})
	h.pods.pods = map[types.UID]bool{"a": false, "b": false, "busy": true}
	for i, age := range []time.Duration{3 * time.Minute, 2 * time.Minute, time.Minute} {
		h.rt.container("a", "app", i, age, exited)
	}
	h.rt.container("a", "app", 3, 0, running)
	h.rt.container("a", "side", 0, 5*time.Minute, exited)
	h.rt.container("a", "side", 1, 4*time.Minute, exited)
	h.rt.container("b", "app", 0, 5*time.Minute, exited)
	h.rt.container("b", "app", 1, 4*time.Minute, exited)
	h.rt.container("busy", "app", 0, 5*time.Minute, exited)
	h.rt.container("busy", "app", 1, 4*time.Minute, exited)

	ctx := context.Background()
	h.c.deleteContainersInPod(ctx, runtime.Event{Pod: runtime.PodRef{UID: "a"}, Type: runtime.ContainerDied, ContainerID: "a-app-2"})
	h.c.deleteContainersInPod(ctx, runtime.Event{Pod: runtime.PodRef{UID: "busy"}, Type: runtime.ContainerDied, ContainerID: "busy-app-1"})
	h.rt.mu.Lock()
	defer h.rt.mu.Unlock()
	// Newest first beyond the one kept, as the kubelet's deletor walks them.
	if want := []string{"RemoveContainer a-app-1", "RemoveContainer a-app-0"}; !slices.Equal(h.rt.calls, want) {
		t.Errorf("calls %v, want %v", h.rt.calls, want)
	}
}

// ContainerDied never blocks: deaths beyond the buffer are dropped, for the periodic collection to catch.
func TestContainerDiedDoesNotBlock(t *testing.T) {
	h := newHarness(t, defaultPolicy)
	for range deletorBuffer + 10 {
		h.c.ContainerDied(runtime.Event{Pod: runtime.PodRef{UID: "a"}, Type: runtime.ContainerDied})
	}
}
