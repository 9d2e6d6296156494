package containergc

import (
	"context"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/pleg"
)

// deletorBuffer is how many container deaths may wait for the pod container deletor; more are dropped
// (the periodic collection removes what they would have).
const deletorBuffer = 64

// ContainerDied hands a PLEG ContainerDied event to the pod container deletor without blocking.
func (c *Collector) ContainerDied(ev pleg.Event) {
	select {
	case c.died <- ev:
	default:
	}
}

// runDeletor is the kubelet's pod container deletor: on each container death it removes, with their logs,
// the exited containers of the same pod and name beyond the newest max(maxPerPodContainer, 1), at once
// rather than at the next collection. Pods a worker is terminating or removing are left to it.
func (c *Collector) runDeletor(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-c.died:
			c.deleteContainersInPod(ctx, ev)
		}
	}
}

func (c *Collector) deleteContainersInPod(ctx context.Context, ev pleg.Event) {
	log := logr.FromContextOrDiscard(ctx)
	cs, err := c.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{runtime.LabelPodUID: string(ev.Pod.UID)}})
	if err != nil {
		log.V(2).Info("Pod container deletor: failed to list the pod's containers", "podUID", ev.Pod.UID, "err", err.Error())
		return
	}
	if c.view(ctx).state(ev.Pod.UID) != podActive {
		return
	}
	for _, d := range toDeleteInPod(cs, ev.Pod.UID, ev.ContainerID, max(c.policy.MaxPerPodContainer, 1)) {
		c.gcMu.Lock()
		c.removeContainer(ctx, d)
		c.gcMu.Unlock()
	}
}

// toDeleteInPod are the exited containers of the pod uid named as the one with ID died, beyond the newest
// keep (the kubelet's getContainersToDeleteInPod).
func toDeleteInPod(cs []*runtimeapi.Container, uid types.UID, died string, keep int) []deadContainer {
	name := ""
	for _, c := range cs {
		if c.GetId() == died && runtime.PodUIDOf(c.GetLabels()) == uid {
			name = c.GetMetadata().GetName()
		}
	}
	if name == "" {
		return nil
	}
	var exited []deadContainer
	for _, c := range cs {
		if c.GetMetadata().GetName() == name && runtime.PodUIDOf(c.GetLabels()) == uid &&
			c.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			exited = append(exited, deadContainer{c: c, uid: runtime.PodUIDOf(c.GetLabels()), name: name,
				created: time.Unix(0, c.GetCreatedAt())})
		}
	}
	if len(exited) <= keep {
		return nil
	}
	slices.SortFunc(exited, newestFirst)
	return exited[keep:]
}
