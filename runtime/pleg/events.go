package pleg

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/go-logr/logr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
)

// eventsBackoff spaces re-subscriptions to the runtime's container events.
var eventsBackoff = runtime.Backoff{Initial: time.Second, Max: 30 * time.Second}

// errEventStreamClosed: the runtime ended the container event stream without an error.
var errEventStreamClosed = errors.New("container event stream closed by the runtime")

// criEventTypes maps CRI container event types to PLEG event types.
var criEventTypes = map[runtimeapi.ContainerEventType]EventType{
	runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT: ContainerChanged,
	runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT: ContainerStarted,
	runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT: ContainerDied,
	runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT: ContainerRemoved,
}

// watchEvents follows the runtime's container events until ctx ends or the runtime turns out not to offer
// them, re-subscribing with back-off (on the clock) when the stream breaks. Events only hasten what relisting
// would report: they do not count for Healthy.
func (p *PLEG) watchEvents(ctx context.Context) {
	log := logr.FromContextOrDiscard(ctx)
	wait := eventsBackoff.Initial
	for {
		received, err := p.followEvents(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, runtime.ErrUnimplemented):
			log.Info("Container runtime offers no container events, relisting only")
			return
		case received:
			wait = eventsBackoff.Initial
		}
		log.Info("Container event stream broke, re-subscribing", "retryIn", wait, "err", err.Error())
		if !p.sleep(ctx, wait) {
			return
		}
		wait = min(2*wait, eventsBackoff.Max)
	}
}

// followEvents subscribes once and emits an event per CRI event until the stream breaks; received tells
// whether any event came through. The runtime may refuse the subscription on the first Recv.
func (p *PLEG) followEvents(ctx context.Context) (received bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := p.runtime.GetContainerEvents(ctx)
	if err != nil {
		p.metrics.connError.Inc()
		return false, err
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return received, errEventStreamClosed
		}
		if err != nil {
			if !received && ctx.Err() == nil {
				p.metrics.connError.Inc()
			}
			return received, runtime.MapError("GetContainerEvents", err)
		}
		if !received {
			p.metrics.connSuccess.Inc()
		}
		received = true
		if ev, ok := eventFromCRI(resp); ok {
			p.cache.observe(ev.Pod.UID, resp)
			p.emitAll(ctx, []Event{ev})
		}
	}
}

// eventFromCRI turns a CRI container event into a PLEG event for the pod named by the sandbox's labels;
// ok is false for events about objects that are not ours.
func eventFromCRI(resp *runtimeapi.ContainerEventResponse) (ev Event, ok bool) {
	sandbox := resp.GetPodSandboxStatus()
	ref, ok := podRefOf(sandbox.GetLabels())
	if !ok {
		return Event{}, false
	}
	typ, ok := criEventTypes[resp.GetContainerEventType()]
	if !ok {
		return Event{}, false
	}
	if resp.GetContainerId() == sandbox.GetId() {
		typ = SandboxChanged
	}
	return Event{Pod: ref, Type: typ, ContainerID: resp.GetContainerId()}, true
}

// sleep waits d on the clock; false when ctx ended first.
func (p *PLEG) sleep(ctx context.Context, d time.Duration) bool {
	t := p.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
