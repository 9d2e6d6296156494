package devices

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodelet/nodelet/podrules"
)

// Allocate gives each container of a pod being admitted the devices of every device plugin resource it
// asks for, as the kubelet's device manager does at admission: first the assignments of pods that no longer
// hold devices (keep says which do; nil: all, until every pod source was read) are released; then init
// containers in order, each regular init container's devices left to the containers after it, then the other
// containers. Its error rejects the pod (UnexpectedAdmissionError). The assignments are checkpointed.
func (m *Manager) Allocate(ctx context.Context, pod *corev1.Pod, keep func(types.UID) bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if keep != nil {
		m.release(pod.UID, keep)
	}
	defer m.writeCheckpoint()
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if err := m.allocateContainer(ctx, pod, c); err != nil {
			return err
		}
		if !podrules.IsSidecar(c) {
			m.addReusable(pod.UID, c.Name)
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if err := m.allocateContainer(ctx, pod, c); err != nil {
			return err
		}
		m.removeReusable(pod.UID, c.Name)
	}
	return nil
}

// release forgets the assignments of the pods other than admitting that keep does not hold. The caller
// holds the lock.
func (m *Manager) release(admitting types.UID, keep func(types.UID) bool) {
	for uid := range m.pods {
		if uid != admitting && !keep(uid) {
			delete(m.pods, uid)
		}
	}
	for uid := range m.reuse {
		if uid != admitting && !keep(uid) {
			delete(m.reuse, uid)
		}
	}
}

// addReusable leaves an init container's devices to the containers after it.
func (m *Manager) addReusable(uid types.UID, container string) {
	for name, cd := range m.pods[uid][container] {
		if m.reuse[uid] == nil {
			m.reuse[uid] = map[string]sets.Set[string]{}
		}
		if m.reuse[uid][name] == nil {
			m.reuse[uid][name] = sets.New[string]()
		}
		m.reuse[uid][name].Insert(sets.List(cd.all())...)
	}
}

// removeReusable takes a container's devices out of those left to the next containers.
func (m *Manager) removeReusable(uid types.UID, container string) {
	for name, cd := range m.pods[uid][container] {
		if r := m.reuse[uid][name]; r != nil {
			r.Delete(sets.List(cd.all())...)
		}
	}
}

// allocateContainer gives one container its devices of each resource and records the plugin's answer.
// The caller holds the lock.
func (m *Manager) allocateContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container) error {
	limits := m.deviceLimits(pod, c)
	for _, name := range sortedKeys(limits) {
		needed := limits[name]
		ids, err := m.devicesToAllocate(ctx, pod.UID, c.Name, name, needed)
		if err != nil {
			return err
		}
		if ids == nil {
			continue // assigned already
		}
		ep, err := m.plugin(name)
		if err != nil {
			return err
		}
		list := sets.List(ids)
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := ep.client.Allocate(cctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: list}}})
		cancel()
		if err != nil {
			return err
		}
		if len(resp.GetContainerResponses()) == 0 {
			return fmt.Errorf("no containers return in allocation response %v", resp)
		}
		m.pods.set(pod.UID, c.Name, name, containerDevices{ids: m.byNUMA(name, list), resp: resp.ContainerResponses[0]})
	}
	return nil
}

// byNUMA groups device IDs by the NUMA nodes their plugin says they are on.
func (m *Manager) byNUMA(name string, ids []string) map[int64][]string {
	out := map[int64][]string{}
	for _, id := range ids {
		d := m.devices[name][id]
		if d == nil || d.Topology == nil || len(d.Topology.Nodes) == 0 {
			out[nodeWithoutTopology] = append(out[nodeWithoutTopology], id)
			continue
		}
		for _, n := range d.Topology.Nodes {
			out[n.ID] = append(out[n.ID], id)
		}
	}
	return out
}

// devicesToAllocate chooses a container's devices of a resource, as the kubelet does: none when it has them
// already (an error when it asks for another number now), then the devices its pod's init containers left,
// then the plugin's preferred ones among the free healthy devices, then the free healthy devices in order.
// The caller holds the lock.
func (m *Manager) devicesToAllocate(ctx context.Context, uid types.UID, container, name string, required int) (sets.Set[string], error) {
	if done, err := m.assigned(uid, container, name, required); done || err != nil {
		return nil, err
	}
	healthy := m.healthy[name]
	allocated := sets.New[string]()
	needed := required
	take := func(from sets.Set[string]) bool {
		for _, id := range sets.List(from) {
			if needed == 0 {
				break
			}
			if !allocated.Has(id) {
				allocated.Insert(id)
				needed--
			}
		}
		return needed == 0
	}
	if take(m.reuse[uid][name].Intersection(healthy)) {
		return allocated, nil
	}
	available := healthy.Difference(m.pods.inUse()[name]).Difference(allocated)
	if available.Len() < needed {
		return nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", name, needed, available.Len())
	}
	ep, err := m.plugin(name)
	if err != nil {
		return nil, fmt.Errorf("endpoint not found in cache for a registered resource: %s", name)
	}
	if ep.opts.GetGetPreferredAllocationAvailable() {
		preferred, err := m.preferred(ctx, ep, available.Union(allocated), allocated, required)
		if err != nil {
			return nil, err
		}
		if take(preferred.Intersection(available)) {
			return allocated, nil
		}
	}
	take(available)
	return allocated, nil
}

// assigned reports whether a container has its devices of a resource already, or why it cannot be given
// any: the resource is not registered, has no healthy device, or the devices it has are no longer
// healthy, or the container asks for another number now. The caller holds the lock.
func (m *Manager) assigned(uid types.UID, container, name string, required int) (bool, error) {
	cd, assigned := m.pods[uid][container][name]
	if assigned && cd.all().Len() != required {
		return false, fmt.Errorf("pod %q container %q changed request for resource %q from %d to %d", uid, container, name, cd.all().Len(), required)
	}
	healthy, registered := m.healthy[name]
	switch {
	case !registered:
		return false, fmt.Errorf("cannot allocate unregistered device %s", name)
	case healthy.Len() == 0:
		return false, fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", name)
	case assigned && !healthy.IsSuperset(cd.all()):
		return false, fmt.Errorf("previously allocated devices are no longer healthy; cannot allocate unhealthy devices %s", name)
	}
	return assigned, nil
}

// preferred asks a plugin which devices it would rather give.
func (m *Manager) preferred(ctx context.Context, ep *endpoint, available, mustInclude sets.Set[string], size int) (sets.Set[string], error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := ep.client.GetPreferredAllocation(cctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: sets.List(available), MustIncludeDeviceIDs: sets.List(mustInclude), AllocationSize: int32(size), //nolint:gosec // a container's device count
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("device plugin GetPreferredAllocation rpc failed with err: %w", err)
	}
	out := sets.New[string]()
	for _, r := range resp.GetContainerResponses() {
		out.Insert(r.DeviceIDs...)
	}
	return out, nil
}

// RunContainerOptions are what a container's devices add to its CRI config (nil: it has none). A plugin
// that asks for it is told first that the container is about to start (PreStartContainer). A container
// asking for devices it was not given (its pod admitted before an agent restart that lost them) is
// given them now.
func (m *Manager) RunContainerOptions(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (*RunOptions, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, name := range sortedKeys(m.deviceLimits(pod, c)) {
		if _, ok := m.pods[pod.UID][c.Name][name]; !ok {
			m.log.V(2).Info("Allocating the devices of a container admitted without them", "pod", pod.Namespace+"/"+pod.Name, "containerName", c.Name, "resourceName", name)
			if err := m.allocateContainer(ctx, pod, c); err != nil {
				return nil, err
			}
			m.writeCheckpoint()
		}
		if err := m.preStart(ctx, pod.UID, c.Name, name); err != nil {
			return nil, err
		}
	}
	return m.pods.runOptions(m.log, pod.UID, c.Name), nil
}

// preStart calls the plugin's PreStartContainer with the container's devices when the plugin asks for it.
func (m *Manager) preStart(ctx context.Context, uid types.UID, container, name string) error {
	ep, err := m.plugin(name)
	if err != nil {
		return fmt.Errorf("endpoint not found in cache for a registered resource: %s", name)
	}
	if !ep.opts.GetPreStartRequired() {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, preStartTimeout)
	defer cancel()
	cd, ok := m.pods[uid][container][name]
	if !ok {
		return fmt.Errorf("no devices found allocated in local cache for pod %s, container %s, resource %s", uid, container, name)
	}
	ids := sets.List(cd.all())
	if _, err := ep.client.PreStartContainer(cctx, &pluginapi.PreStartContainerRequest{DevicesIds: ids}); err != nil {
		return fmt.Errorf("device plugin PreStartContainer rpc failed with err: %w", err)
	}
	return nil
}
