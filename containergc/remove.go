package containergc

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
)

// evictContainers lists the containers, then asks which pods are still there (a snapshot taken after the
// listing: whatever a worker created meanwhile is not in the list), and removes the dead containers
// selectContainers picks.
func (c *Collector) evictContainers(ctx context.Context, p Policy) error {
	all, err := c.runtime.ListContainers(ctx, nil)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	v := c.view(ctx)
	for _, d := range selectContainers(all, c.clock.Now(), p, v) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.removeContainer(ctx, d)
	}
	return nil
}

// removeContainer is the kubelet's removeContainer: a container in an unknown state is stopped first, then
// its logs are removed and then the container — kept, for the next pass, when its logs cannot be.
// Failures are logged.
func (c *Collector) removeContainer(ctx context.Context, d deadContainer) {
	log := logr.FromContextOrDiscard(ctx).WithValues("containerID", d.id(), "podUID", d.uid, "containerName", d.name)
	if d.c.GetState() == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
		// It could be running: stop it before removal, as the kubelet.
		err := c.runtime.StopContainer(ctx, d.id(), stopTimeout(d.c.GetAnnotations()))
		if err != nil && !errors.Is(err, runtime.ErrNotFound) {
			log.Error(err, "Failed to stop container in an unknown state before removal")
			return
		}
	}
	log.V(4).Info("Removing container")
	if err := c.removeContainerLogs(ctx, d.id()); err != nil {
		if !errors.Is(err, runtime.ErrNotFound) {
			log.Error(err, "Failed to remove container")
		}
		return
	}
	if err := c.runtime.RemoveContainer(ctx, d.id()); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		log.Error(err, "Failed to remove container")
	}
}

// stopTimeout is the grace period the kubelet stops a container of a pod it only knows from the
// runtime with: the pod's deletion grace period, else its termination grace period, as the container's
// annotations recorded them, and at least podrules.MinimumGracePeriod.
func stopTimeout(annotations map[string]string) int64 {
	for _, k := range []string{runtime.AnnotationPodDeletionGracePeriod, runtime.AnnotationPodTerminationGracePeriod} {
		if g, err := strconv.ParseInt(annotations[k], 10, 64); err == nil {
			return max(g, podrules.MinimumGracePeriod)
		}
	}
	return podrules.MinimumGracePeriod
}

// evictSandboxes lists the containers and sandboxes, asks which pods are still there, and removes the
// sandboxes selectSandboxes picks. It returns the pods that still have containers.
func (c *Collector) evictSandboxes(ctx context.Context) (map[types.UID]bool, error) {
	containers, err := c.runtime.ListContainers(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	sandboxes, err := c.runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	v := c.view(ctx)
	for _, id := range selectSandboxes(sandboxes, containers, v) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.removeSandbox(ctx, id)
	}
	withContainers := map[types.UID]bool{}
	for _, ctr := range containers {
		withContainers[runtime.PodUIDOf(ctr.GetLabels())] = true
	}
	return withContainers, nil
}

// removeSandbox stops and removes a sandbox (the kubelet stops it first, should it still run); failures
// are logged.
func (c *Collector) removeSandbox(ctx context.Context, id string) {
	log := logr.FromContextOrDiscard(ctx).WithValues("sandboxID", id)
	log.V(4).Info("Removing sandbox")
	if err := c.runtime.StopPodSandbox(ctx, id); err != nil {
		if !errors.Is(err, runtime.ErrNotFound) {
			log.Error(err, "Failed to stop sandbox before removing")
		}
		return
	}
	if err := c.runtime.RemovePodSandbox(ctx, id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		log.Error(err, "Failed to remove sandbox")
	}
}
