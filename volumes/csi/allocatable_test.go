package csi_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodelet/nodelet/volumes/csi"
)

// enqueued records the drivers whose state the updater asked to have written.
type enqueued struct {
	mu      sync.Mutex
	drivers []string
}

func (e *enqueued) Enqueue(driver string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.drivers = append(e.drivers, driver)
}

func (e *enqueued) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.drivers)
}

// A driver whose CSIDriver sets nodeAllocatableUpdatePeriodSeconds is asked NodeGetInfo again once a period
// has passed, and its new volume limit is registered and written; a driver without it is asked only when it
// registers.
func TestAllocatableCountIsRefreshedEveryPeriod(t *testing.T) {
	root := tempDir(t)
	n := startNode(t, root)
	p := newFakePlugin(t, root, driverName)
	p.maxVols = 5
	p.start(t, n.regSocket(driverName))
	other := newFakePlugin(t, root, "other.csi.example.com")
	other.start(t, n.regSocket("other.csi.example.com"))
	n.eventually(t, "both drivers are registered", func() bool {
		return n.registered(driverName, "node-1")() && n.registered("other.csi.example.com", "node-1")()
	})

	// Registration asks NodeGetInfo (again, if a slow first attempt is retried): count from here on.
	otherAtRegistration := other.callCount("NodeGetInfo")

	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	drivers := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driverName}, Spec: storagev1.CSIDriverSpec{NodeAllocatableUpdatePeriodSeconds: ptr.To[int64](10)}},
		&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "other.csi.example.com"}}).Build()
	w := &enqueued{}
	u := &csi.AllocatableUpdater{Registry: n.registry, CSIDrivers: drivers, Writer: w, Clock: n.clock}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = u.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	p.mu.Lock()
	p.maxVols = 9
	p.mu.Unlock()
	n.eventually(t, "the new limit is registered after a period", func() bool {
		d, _ := n.registry.Get(driverName)
		return d.MaxVolumes == 9
	})
	if got := w.list(); len(got) == 0 || got[0] != driverName || slices.Contains(got, "other.csi.example.com") {
		t.Errorf("drivers written %v, want %s only", got, driverName)
	}
	if c := other.callCount("NodeGetInfo"); c != otherAtRegistration {
		t.Errorf("a driver without an update period was asked NodeGetInfo %d times, want %d (only when it registered)", c, otherAtRegistration)
	}
	// Unchanged answers are not written again.
	before := len(w.list())
	calls := p.callCount("NodeGetInfo")
	n.eventually(t, "another refresh", func() bool { return p.callCount("NodeGetInfo") > calls })
	n.clock.Step(time.Second)
	if got := len(w.list()); got != before {
		t.Errorf("an unchanged NodeGetInfo answer was written again (%d writes, want %d)", got, before)
	}
}
