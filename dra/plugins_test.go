package dra

import (
	"context"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/fields"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// sliceWiper records the ResourceSlice deletions asked of it.
type sliceWiper struct {
	client.Client
	deleted chan string // field selectors
}

func (w sliceWiper) DeleteAllOf(_ context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if _, ok := obj.(*resourceapi.ResourceSlice); !ok {
		panic("not a ResourceSlice")
	}
	var o client.DeleteAllOfOptions
	o.ApplyOptions(opts)
	w.deleted <- o.FieldSelector.String()
	return nil
}

type syncEvent struct {
	driver string
	usable bool
}

func newWipeBed(t *testing.T) (*Plugins, *clocktesting.FakeClock, chan string, chan syncEvent) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	deleted := make(chan string, 10)
	ps := newPlugins(sliceWiper{fake.NewClientBuilder().Build(), deleted}, "node-1", clk, 0)
	synced := make(chan syncEvent, 100)
	ps.onSync = func(driver string, usable bool) { synced <- syncEvent{driver, usable} }
	ctx, cancel := context.WithCancel(testCtx(t))
	t.Cleanup(cancel)
	ps.start(ctx)
	if got := <-deleted; got != "spec.nodeName=node-1" {
		t.Fatalf("at start deleted %q, want every slice of the node", got)
	}
	return ps, clk, deleted, synced
}

// waitUsable waits until the driver's plugin is connected (or, usable false, until a sync saw none).
func waitUsable(t *testing.T, synced chan syncEvent, driver string, usable bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-synced:
			if e.driver == driver && e.usable == usable {
				return
			}
		case <-timeout:
			t.Fatalf("driver %s never became usable=%v", driver, usable)
		}
	}
}

func TestSlicesWipedThirtySecondsAfterTheLastPlugin(t *testing.T) {
	ps, clk, deleted, synced := newWipeBed(t)
	ctx := testCtx(t)
	p := &fakePlugin{driver: "gpu.example.com"}
	endpoint := p.serve(t, socketDir(t), false)
	if err := ps.RegisterPlugin(ctx, p.driver, endpoint, []string{"v1.DRAPlugin"}); err != nil {
		t.Fatal(err)
	}
	waitUsable(t, synced, p.driver, true)

	ps.DeRegisterPlugin(ctx, p.driver, endpoint)
	clk.Step(29 * time.Second)
	select {
	case got := <-deleted:
		t.Fatalf("deleted %q before 30 s", got)
	default:
	}
	// Back within the 30 s: the slices stay.
	endpoint2 := (&fakePlugin{driver: p.driver}).serve(t, socketDir(t), false)
	if err := ps.RegisterPlugin(ctx, p.driver, endpoint2, []string{"v1.DRAPlugin"}); err != nil {
		t.Fatal(err)
	}
	waitUsable(t, synced, p.driver, true)
	clk.Step(time.Minute)
	select {
	case got := <-deleted:
		t.Fatalf("deleted %q though the driver came back", got)
	default:
	}

	// Gone for good: its slices, and only its, are deleted after 30 s.
	ps.DeRegisterPlugin(ctx, p.driver, endpoint2)
	for !clk.HasWaiters() {
		waitUsable(t, synced, p.driver, false)
	}
	clk.Step(30 * time.Second)
	select {
	case got := <-deleted:
		if sel, err := fields.ParseSelector(got); err != nil || !sel.Matches(fields.Set{"spec.driver": "gpu.example.com", "spec.nodeName": "node-1"}) ||
			sel.Matches(fields.Set{"spec.driver": "other.example.com", "spec.nodeName": "node-1"}) {
			t.Fatalf("deleted %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the driver's slices were not deleted")
	}
}

func TestNewestConnectedPluginIsUsed(t *testing.T) {
	ps, _, _, synced := newWipeBed(t)
	ctx := testCtx(t)
	old := &fakePlugin{driver: "gpu.example.com"}
	oldEndpoint := old.serve(t, socketDir(t), false)
	if err := ps.RegisterPlugin(ctx, old.driver, oldEndpoint, []string{"v1.DRAPlugin"}); err != nil {
		t.Fatal(err)
	}
	waitUsable(t, synced, old.driver, true)
	if err := ps.RegisterPlugin(ctx, old.driver, oldEndpoint, []string{"v1.DRAPlugin"}); err == nil {
		t.Fatal("the same endpoint registered twice")
	}
	// A newer plugin whose socket does not answer: the older, connected one is used.
	if err := ps.RegisterPlugin(ctx, old.driver, socketDir(t)+"/none.sock", []string{"v1.DRAPlugin"}); err != nil {
		t.Fatal(err)
	}
	p, err := ps.get(old.driver)
	if err != nil || p.endpoint != oldEndpoint {
		t.Fatalf("got %v, %v; want the connected plugin", p, err)
	}
	if got := ps.Registered(); len(got) != 1 || got[0] != old.driver {
		t.Fatalf("registered: %v", got)
	}
}
