package podsyncer

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
)

// stopOrder is the kubelet's termination ordering for a pod with sidecars: every container's preStop hook
// runs at once, but a sidecar is only sent its stop signal once every regular container being stopped has
// stopped, and every sidecar declared after it too (sidecars stop in reverse order), or the grace period
// ends. A sidecar serving the others — a proxy, the HTTP server another sidecar's preStop hook calls —
// thus runs until they are done.
type stopOrder struct {
	mu sync.Mutex
	// stopped is closed once the named container has stopped.
	stopped map[string]chan struct{}
	// after lists what must have stopped before the named container may be stopped.
	after map[string][]chan struct{}
}

// newStopOrder orders the containers of one stop. Without the pod's spec (a pod known only from the
// runtime) the kinds recorded at creation tell regular containers and sidecars apart, and sidecars stop
// together after the regular containers.
func newStopOrder(pod *corev1.Pod, kills []killAction) *stopOrder {
	o := &stopOrder{stopped: map[string]chan struct{}{}, after: map[string][]chan struct{}{}}
	var regular []chan struct{}
	for _, k := range kills {
		if _, dup := o.stopped[k.container.Name]; dup {
			continue
		}
		ch := make(chan struct{})
		o.stopped[k.container.Name] = ch
		if stopKind(pod, k.container) == runtime.KindRegular {
			regular = append(regular, ch)
		}
	}
	var later chan struct{}
	for _, name := range sidecarsLastFirst(pod, kills) {
		o.after[name] = append([]chan struct{}(nil), regular...)
		if later != nil {
			o.after[name] = append(o.after[name], later)
		}
		if pod != nil {
			later = o.stopped[name]
		}
	}
	return o
}

// stopKind is a container's kind for the ordering: from the pod's spec, else from the runtime.
func stopKind(pod *corev1.Pod, c *runtime.ContainerStatus) runtime.ContainerKind {
	if pod == nil {
		return c.Kind
	}
	spec, kind := podrules.FindContainer(pod, c.Name)
	switch {
	case kind == podrules.RegularContainer:
		return runtime.KindRegular
	case kind == podrules.InitContainer && podrules.IsSidecar(spec):
		return runtime.KindSidecar
	case kind == podrules.InitContainer:
		return runtime.KindInit
	case kind == podrules.EphemeralContainer:
		return runtime.KindEphemeral
	}
	return c.Kind
}

// sidecarsLastFirst names the sidecars being stopped, the last declared first.
func sidecarsLastFirst(pod *corev1.Pod, kills []killAction) []string {
	stopping := map[string]bool{}
	var out []string
	for _, k := range kills {
		stopping[k.container.Name] = true
		if pod == nil && k.container.Kind == runtime.KindSidecar {
			out = append(out, k.container.Name)
		}
	}
	if pod == nil {
		return out
	}
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		if podrules.IsSidecar(c) && stopping[c.Name] {
			out = append(out, c.Name)
		}
	}
	return out
}

// waitForTurn blocks until the container may be stopped, the deadline passes or ctx ends.
func (o *stopOrder) waitForTurn(ctx context.Context, clk clock.Clock, name string, deadline time.Time) {
	if o == nil || len(o.after[name]) == 0 {
		return
	}
	timeout := clk.After(deadline.Sub(clk.Now()))
	for _, ch := range o.after[name] {
		select {
		case <-ch:
		case <-timeout:
			return
		case <-ctx.Done():
			return
		}
	}
}

// done records that the container has stopped.
func (o *stopOrder) done(name string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.stopped[name]; ok {
		close(ch)
		delete(o.stopped, name)
	}
}
