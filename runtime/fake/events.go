package fake

import (
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// subscriber is one GetContainerEvents stream with an unbounded queue, so
// publishing never blocks while r.mu is held.
type subscriber struct {
	mu     sync.Mutex
	queue  []*runtimeapi.ContainerEventResponse
	notify chan struct{}
}

func newSubscriber() *subscriber {
	return &subscriber{notify: make(chan struct{}, 1)}
}

func (s *subscriber) push(ev *runtimeapi.ContainerEventResponse) {
	s.mu.Lock()
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *subscriber) drain() []*runtimeapi.ContainerEventResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	return q
}

// publishLocked sends an event about id (a container or a sandbox) of sandbox
// sandboxID to every subscriber. The sandbox must still be in r.sandboxes.
func (r *state) publishLocked(sandboxID, id string, typ runtimeapi.ContainerEventType) {
	s, ok := r.sandboxes[sandboxID]
	if !ok || len(r.subs) == 0 {
		return
	}
	createdAt := r.now()
	for sub := range r.subs {
		sub.push(&runtimeapi.ContainerEventResponse{
			ContainerId:        id,
			ContainerEventType: typ,
			CreatedAt:          createdAt,
			PodSandboxStatus:   s.status(),
			ContainersStatuses: r.containerStatusesLocked(sandboxID),
		})
	}
}

// GetContainerEvents streams sandbox and container lifecycle events until the
// client goes away or the runtime is stopped.
func (r *infoService) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	sub, err := r.subscribe()
	if err != nil {
		return err
	}
	defer r.unsubscribe(sub)
	ctx := stream.Context()
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-r.done:
			return nil
		case <-sub.notify:
			for _, ev := range sub.drain() {
				if err := stream.Send(ev); err != nil {
					return err
				}
			}
		}
	}
}

func (r *state) subscribe() (*subscriber, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.beginLocked("GetContainerEvents"); err != nil {
		return nil, err
	}
	sub := newSubscriber()
	r.subs[sub] = struct{}{}
	return sub, nil
}

func (r *state) unsubscribe(sub *subscriber) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.subs, sub)
}
