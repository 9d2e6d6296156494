package staticpods

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func mustDecode(t *testing.T, name, image, source string) []*corev1.Pod {
	t.Helper()
	pods, err := Decode([]byte(podYAML(name, image)), testNode, source)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

func key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "kube-system", Name: name + "-node-1"}
}

// next reads the next event's namespace/name, failing after a bound.
func next(t *testing.T, events <-chan event.GenericEvent) types.NamespacedName {
	t.Helper()
	select {
	case ev := <-events:
		return types.NamespacedName{Namespace: ev.Object.GetNamespace(), Name: ev.Object.GetName()}
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return types.NamespacedName{}
	}
}

func TestStoreEmitsOnlyChanges(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	store := NewStore(testNode, nil)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))
	store.clock = clk
	events := store.Subscribe(ctx)

	store.Update("file:/m/a.yaml", mustDecode(t, "a", "nginx:1.27", "/m/a.yaml"))
	if got := next(t, events); got != key("a") {
		t.Fatalf("event %s, want %s", got, key("a"))
	}
	first, _ := store.Get(key("a"))
	seen := first.Annotations[AnnotationConfigSeen]
	if seen != "2026-01-02T03:04:05.000000006Z" {
		t.Errorf("config.seen = %q, want the store clock's time in RFC3339Nano", seen)
	}

	// A re-read of the same manifest, later, changes nothing and emits nothing: the next event is b's.
	clk.Step(time.Minute)
	store.Update("file:/m/a.yaml", mustDecode(t, "a", "nginx:1.27", "/m/a.yaml"))
	store.Update("file:/m/b.yaml", mustDecode(t, "b", "nginx:1.27", "/m/b.yaml"))
	if got := next(t, events); got != key("b") {
		t.Fatalf("event %s, want %s (an unchanged snapshot must emit nothing)", got, key("b"))
	}
	if again, _ := store.Get(key("a")); again.Annotations[AnnotationConfigSeen] != seen {
		t.Errorf("config.seen moved from %s to %s on an unchanged read", seen, again.Annotations[AnnotationConfigSeen])
	}

	// An edit is a new pod (new UID, new config.seen); a removal is announced too.
	store.Update("file:/m/a.yaml", mustDecode(t, "a", "nginx:1.28", "/m/a.yaml"))
	if got := next(t, events); got != key("a") {
		t.Fatalf("event %s, want %s", got, key("a"))
	}
	edited, _ := store.Get(key("a"))
	if edited.UID == first.UID || edited.Annotations[AnnotationConfigSeen] == seen {
		t.Errorf("edited pod kept UID %s / config.seen %s", edited.UID, seen)
	}
	if _, ok := store.GetByUID(first.UID); ok {
		t.Errorf("the old UID is still in the store")
	}
	store.Update("file:/m/b.yaml", nil)
	if got := next(t, events); got != key("b") {
		t.Fatalf("event %s, want %s", got, key("b"))
	}
	if _, ok := store.Get(key("b")); ok {
		t.Errorf("b still in the store after its source was emptied")
	}
}

func TestStoreGetReturnsCopies(t *testing.T) {
	store := NewStore(testNode, nil)
	store.Update("http", mustDecode(t, "a", "nginx:1.27", "http://x/pods"))
	pod, ok := store.Get(key("a"))
	if !ok {
		t.Fatal("pod missing")
	}
	pod.Spec.Containers[0].Image = "mutated"
	byUID, ok := store.GetByUID(pod.UID)
	if !ok || byUID.Spec.Containers[0].Image != "nginx:1.27" {
		t.Errorf("GetByUID = %v, %v; want the unmutated pod", ok, byUID.Spec.Containers[0].Image)
	}
	if list := store.List(); len(list) != 1 || list[0].Spec.Containers[0].Image != "nginx:1.27" {
		t.Errorf("List = %v", podNames(list))
	}
}

func TestStoreDuplicatesFirstWins(t *testing.T) {
	rec := &recorder{}
	store := NewStore(testNode, rec.Report)
	// The same pod name in b.yaml and a.yaml: a.yaml (first by file name) wins, whatever the order of reads.
	fromB := mustDecode(t, "web", "nginx:1.28", "/m/b.yaml")
	fromA := mustDecode(t, "web", "nginx:1.27", "/m/a.yaml")
	store.Update("file:/m/b.yaml", fromB)
	store.Update("file:/m/a.yaml", fromA)
	if got, _ := store.Get(key("web")); got.UID != fromA[0].UID {
		t.Errorf("pod from %s won, want a.yaml's", got.Spec.Containers[0].Image)
	}
	store.Update("file:/m/a.yaml", fromA) // re-read: the duplicate is not reported again
	if n := rec.count(ReasonDuplicate, "kube-system/web-node-1", "file:/m/b.yaml", "file:/m/a.yaml"); n != 1 {
		t.Errorf("duplicate reported %d times, want once; reports %v", n, rec.all())
	}
	// a.yaml removed: b.yaml's pod takes the name.
	store.Update("file:/m/a.yaml", nil)
	if got, _ := store.Get(key("web")); got.UID != fromB[0].UID {
		t.Errorf("after a.yaml went, the pod is %s, want b.yaml's", got.UID)
	}
}

func TestStoreDuplicateUID(t *testing.T) {
	rec := &recorder{}
	store := NewStore(testNode, rec.Report)
	a, b := mustDecode(t, "a", "nginx:1.27", "/m/a.yaml"), mustDecode(t, "b", "nginx:1.27", "/m/b.yaml")
	b[0].UID = a[0].UID // a manifest may set its UID, and the kubelet keeps it
	store.Update("file:/m/a.yaml", a)
	store.Update("file:/m/b.yaml", b)
	if _, ok := store.Get(key("b")); ok || rec.count(ReasonDuplicate, "UID "+string(a[0].UID)) != 1 {
		t.Errorf("b stored = %v, reports %v; want b ignored and reported", ok, rec.all())
	}
}

func TestStoreIgnoresPodsWithoutIdentity(t *testing.T) {
	rec := &recorder{}
	store := NewStore(testNode, rec.Report)
	store.Update("http", []*corev1.Pod{nil, {}})
	if len(store.List()) != 0 || rec.count(ReasonInvalid) != 2 {
		t.Errorf("List = %v, reports %v; want nothing stored and two reports", podNames(store.List()), rec.all())
	}
}

// TestStoreSourceFanOut starts two controller-runtime sources on one store: each queue gets every
// change, and a source started late first gets the pods already there.
func TestStoreSourceFanOut(t *testing.T) {
	g := newG(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	store := NewStore(testNode, nil)
	store.Update("file:/m/a.yaml", mustDecode(t, "a", "nginx:1.27", "/m/a.yaml"))

	queues := make([]workqueue.TypedRateLimitingInterface[reconcile.Request], 2)
	for i := range queues {
		queues[i] = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		defer queues[i].ShutDown()
		if err := store.Source().Start(ctx, queues[i]); err != nil {
			t.Fatal(err)
		}
	}
	store.Update("file:/m/b.yaml", mustDecode(t, "b", "nginx:1.27", "/m/b.yaml"))
	for i, q := range queues {
		got := map[types.NamespacedName]bool{}
		g.Eventually(func() int {
			for q.Len() > 0 {
				req, _ := q.Get()
				got[req.NamespacedName] = true
				q.Done(req)
			}
			return len(got)
		}).Should(gomega.Equal(2), "queue %d", i)
		if !got[key("a")] || !got[key("b")] {
			t.Errorf("queue %d got %v, want a and b", i, got)
		}
	}
}

func TestSubscribeEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	store := NewStore(testNode, nil)
	events := store.Subscribe(ctx)
	cancel()
	select {
	case _, open := <-events:
		if open {
			t.Fatal("event on an empty store")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("channel not closed after the context ended")
	}
	store.Update("http", mustDecode(t, "a", "nginx:1.27", "http://x/pods")) // must not block
}
