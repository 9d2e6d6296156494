package staticpods

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Source returns a new controller-runtime source that enqueues the namespace/name of every static pod
// that appeared, changed or disappeared. Each call (each Start) has its own subscription, so several
// controllers can each watch the store. On Start it enqueues every current static pod once.
func (s *Store) Source() source.Source {
	return &storeSource{store: s}
}

type storeSource struct{ store *Store }

// Start subscribes to the store for as long as ctx lives and feeds a source.Channel; it does not block.
func (ss *storeSource) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	events := ss.store.Subscribe(ctx)
	return source.Channel(events, &handler.EnqueueRequestForObject{}).Start(ctx, queue)
}

func (ss *storeSource) String() string { return "staticpods.Store" }

// Subscribe returns a channel of GenericEvents, one per changed static pod, for as long as ctx lives
// (then it is closed). Each event's Object is a *corev1.Pod stub holding only namespace and name. The
// first events name every current static pod. A slow reader never blocks the store: pending names are
// coalesced until read.
func (s *Store) Subscribe(ctx context.Context) <-chan event.GenericEvent {
	sub := &subscriber{queued: map[types.NamespacedName]struct{}{}, wake: make(chan struct{}, 1)}
	out := make(chan event.GenericEvent)
	s.mu.Lock()
	keys := make([]types.NamespacedName, 0, len(s.merged))
	for k := range s.merged {
		keys = append(keys, k)
	}
	sortNames(keys)
	sub.add(keys)
	s.subs[sub] = struct{}{}
	s.mu.Unlock()
	go s.pump(ctx, sub, out)
	return out
}

// notify hands changed names to every subscriber; called with s.mu held, it never blocks.
func (s *Store) notify(keys []types.NamespacedName) {
	if len(keys) == 0 {
		return
	}
	for sub := range s.subs {
		sub.add(keys)
	}
}

func (s *Store) pump(ctx context.Context, sub *subscriber, out chan<- event.GenericEvent) {
	defer func() {
		s.mu.Lock()
		delete(s.subs, sub)
		s.mu.Unlock()
		close(out)
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.wake:
		}
		for _, key := range sub.take() {
			select {
			case out <- event.GenericEvent{Object: podStub(key)}:
			case <-ctx.Done():
				return
			}
		}
	}
}

func podStub(key types.NamespacedName) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
}

// subscriber is one consumer's queue of changed names, in order, each at most once.
type subscriber struct {
	mu      sync.Mutex
	pending []types.NamespacedName
	queued  map[types.NamespacedName]struct{}
	wake    chan struct{}
}

func (sub *subscriber) add(keys []types.NamespacedName) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	for _, k := range keys {
		if _, ok := sub.queued[k]; !ok {
			sub.queued[k] = struct{}{}
			sub.pending = append(sub.pending, k)
		}
	}
	if len(sub.pending) > 0 {
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
}

func (sub *subscriber) take() []types.NamespacedName {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	keys := sub.pending
	sub.pending = nil
	clear(sub.queued)
	return keys
}
