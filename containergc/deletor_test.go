package containergc

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime/pleg"
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
	h.c.deleteContainersInPod(ctx, pleg.Event{Pod: pleg.PodRef{UID: "a"}, Type: pleg.ContainerDied, ContainerID: "a-app-2"})
	h.c.deleteContainersInPod(ctx, pleg.Event{Pod: pleg.PodRef{UID: "busy"}, Type: pleg.ContainerDied, ContainerID: "busy-app-1"})
	h.rt.mu.Lock()
	defer h.rt.mu.Unlock()
	// Newest first beyond the one kept, as the kubelet's deletor walks them.
	if want := []string{"RemoveContainer a-app-1", "RemoveContainer a-app-0"}; !slices.Equal(h.rt.calls, want) {
		t.Errorf("calls %v, want %v", h.rt.calls, want)
	}
}

// ContainerDied never blocks: with no deletor running, the first deletorBuffer deaths wait for it and later
// ones are dropped, and the periodic collection removes what the dropped ones would have, once those
// containers reach the minimum age on the clock (the deletor removes at once, whatever their age).
func TestContainerDiedDropsDeathsBeyondTheBufferForTheCollection(t *testing.T) {
	h := newHarness(t, Policy{MinAge: time.Hour, MaxPerPodContainer: 1, MaxContainers: -1})
	deaths := podsWithTwoDeadAttempts(h, deletorBuffer+10)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		for _, ev := range deaths {
			h.c.ContainerDied(ev)
		}
	}()
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("ContainerDied blocked with no deletor running")
	}
	if got := len(h.c.died); got != deletorBuffer {
		t.Fatalf("%d deaths queued, want the first %d", got, deletorBuffer)
	}
	ctx := context.Background()
	for _, want := range deaths[:deletorBuffer] { // what runDeletor does with each
		ev := <-h.c.died
		if ev.ContainerID != want.ContainerID {
			t.Fatalf("queued death of %s, want %s (first come, first queued)", ev.ContainerID, want.ContainerID)
		}
		h.c.deleteContainersInPod(ctx, ev)
	}
	h.collect(t) // the older attempts of the dropped deaths are younger than MinAge: kept
	if got, want := len(h.rt.containerIDs()), len(deaths)+10; got != want {
		t.Fatalf("%d containers after the deletor, want %d (older attempts kept only for the dropped deaths)", got, want)
	}
	h.clock.Step(time.Hour)
	h.collect(t)
	want := make([]string, 0, len(deaths))
	for _, ev := range deaths {
		want = append(want, ev.ContainerID)
	}
	if got := h.rt.containerIDs(); !slices.Equal(got, want) {
		t.Errorf("containers after the collection at the minimum age %v, want the newest attempt of each pod %v", got, want)
	}
}

// podsWithTwoDeadAttempts adds n active pods whose container "app" exited twice (attempts created a minute
// before t0 and at t0), and returns the death of each pod's newest attempt, in pod order.
func podsWithTwoDeadAttempts(h *harness, n int) []pleg.Event {
	h.pods.pods = map[types.UID]bool{}
	deaths := make([]pleg.Event, n)
	for i := range n {
		uid := types.UID(fmt.Sprintf("p%03d", i))
		h.pods.pods[uid] = false
		h.rt.sandbox(uid, 0, 0, ready)
		h.rt.container(uid, "app", 0, time.Minute, exited)
		died := h.rt.container(uid, "app", 1, 0, exited)
		deaths[i] = pleg.Event{Pod: pleg.PodRef{UID: uid}, Type: pleg.ContainerDied, ContainerID: died}
	}
	return deaths
}
