package devices

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/devices/checkpoint"
	"github.com/nodelet/nodelet/podrules"
)

// The kubelet's device manager constants.
const (
	// KubeletSocket is the registration socket's name in the device plugin directory.
	KubeletSocket = "kubelet.sock"
	// stopGracePeriod is how long a resource whose plugin went away stays on the Node (at zero
	// allocatable) before it is removed.
	stopGracePeriod = 5 * time.Minute
	// preStartTimeout bounds a PreStartContainer call (pluginapi.KubeletPreStartContainerRPCTimeoutInSecs).
	preStartTimeout = pluginapi.KubeletPreStartContainerRPCTimeoutInSecs * time.Second
	// callTimeout bounds the other calls to a plugin.
	callTimeout = 30 * time.Second
	// dialTimeout bounds the dial of a registering plugin and its options call.
	dialTimeout = 10 * time.Second
	// nodeWithoutTopology is the NUMA node a device without topology is recorded under.
	nodeWithoutTopology = -1
)

// Options configure a Manager.
type Options struct {
	// Dir is the device plugin directory, <root>/device-plugins: the registration socket, the plugins'
	// sockets and the checkpoint.
	Dir   string
	Log   logr.Logger
	Clock clock.PassiveClock
	// OnChange is told when a resource's devices change (the Node's status is due). It must not block.
	OnChange func()
	// OnHealthChange is told which pods hold devices whose health changed (their status is due). It must
	// not block.
	OnHealthChange func([]types.UID)
}

// Manager is the device manager. Its methods are safe for concurrent use.
type Manager struct {
	dir            string
	log            logr.Logger
	clock          clock.PassiveClock
	onChange       func()
	onHealthChange func([]types.UID)

	mu        sync.Mutex
	endpoints map[string]*endpoint                    // by resource name: the plugin serving it, or one that went away
	healthy   map[string]sets.Set[string]             // by resource name: healthy device IDs
	unhealthy map[string]sets.Set[string]             // by resource name: unhealthy device IDs
	devices   map[string]map[string]*pluginapi.Device // by resource name and ID: the devices last listed
	pods      podDevices
	reuse     map[types.UID]map[string]sets.Set[string] // devices a pod's init containers leave to the containers after them
}

// NewManager reads the checkpoint of opts.Dir: the assignments come back, and each resource registered
// before comes back with no devices and a plugin gone away, until its plugin registers again or the grace
// period passes. A corrupt checkpoint is logged and left for the next write, as the kubelet does.
func NewManager(opts Options) (*Manager, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.OnChange == nil {
		opts.OnChange = func() {}
	}
	if opts.OnHealthChange == nil {
		opts.OnHealthChange = func([]types.UID) {}
	}
	m := &Manager{
		dir: opts.Dir, log: opts.Log, clock: opts.Clock, onChange: opts.OnChange, onHealthChange: opts.OnHealthChange,
		endpoints: map[string]*endpoint{}, healthy: map[string]sets.Set[string]{},
		unhealthy: map[string]sets.Set[string]{}, devices: map[string]map[string]*pluginapi.Device{},
		pods: podDevices{}, reuse: map[types.UID]map[string]sets.Set[string]{},
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, err
	}
	entries, registered, err := checkpoint.Read(m.checkpointPath())
	if err != nil {
		m.log.Error(err, "Continue after failing to read checkpoint file. Device allocation info may NOT be up-to-date")
	}
	for _, e := range entries {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.AllocResp, resp); err != nil {
			m.log.Error(err, "Cannot read a container's devices from the checkpoint", "podUID", e.PodUID, "containerName", e.ContainerName, "resourceName", e.ResourceName)
			continue
		}
		m.pods.set(types.UID(e.PodUID), e.ContainerName, e.ResourceName, containerDevices{ids: e.DeviceIDs, resp: resp})
	}
	now := m.clock.Now()
	for name := range registered {
		m.healthy[name] = sets.New[string]()
		m.unhealthy[name] = sets.New[string]()
		m.endpoints[name] = &endpoint{resource: name, stopped: now}
	}
	return m, nil
}

func (m *Manager) checkpointPath() string { return filepath.Join(m.dir, checkpoint.File) }

// writeCheckpoint records the assignments and the healthy devices. The caller holds the lock.
func (m *Manager) writeCheckpoint() {
	registered := map[string][]string{}
	for name, ids := range m.healthy {
		registered[name] = sets.List(ids)
	}
	if err := checkpoint.Write(m.checkpointPath(), m.pods.entries(), registered); err != nil {
		m.log.Error(err, "Cannot write the device manager checkpoint", "path", m.checkpointPath())
	}
}

// Capacity is what the device plugin resources add to the Node: capacity counts every device,
// allocatable the healthy ones; deleted are the resources whose plugin has been gone longer than the grace
// period (the Node drops them).
func (m *Manager) Capacity() (capacity, allocatable corev1.ResourceList, deleted []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	capacity, allocatable = corev1.ResourceList{}, corev1.ResourceList{}
	now := m.clock.Now()
	changed := false
	for _, name := range sets.List(sets.KeySet(m.healthy).Union(sets.KeySet(m.unhealthy))) {
		if ep, ok := m.endpoints[name]; !ok || ep.expired(now) {
			delete(m.endpoints, name)
			delete(m.healthy, name)
			delete(m.unhealthy, name)
			delete(m.devices, name)
			deleted = append(deleted, name)
			changed = true
			continue
		}
		h, u := m.healthy[name].Len(), m.unhealthy[name].Len()
		capacity[corev1.ResourceName(name)] = *resource.NewQuantity(int64(h+u), resource.DecimalSI)
		if _, ok := m.healthy[name]; ok {
			allocatable[corev1.ResourceName(name)] = *resource.NewQuantity(int64(h), resource.DecimalSI)
		}
	}
	if changed {
		m.writeCheckpoint()
	}
	return capacity, allocatable, deleted
}

// SanitizeAllocatable is the allocatable a pod given devices is admitted against: each device resource's
// allocatable raised to the number of its devices assigned when the Node does not show them yet (a plugin
// that registered since the last Node status), as the kubelet's admission does.
func (m *Manager) SanitizeAllocatable(pod *corev1.Pod, alloc corev1.ResourceList) corev1.ResourceList {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pods[pod.UID]; !ok {
		return alloc
	}
	var out corev1.ResourceList
	for name, ids := range m.pods.inUse() {
		q, ok := alloc[corev1.ResourceName(name)]
		if ok && q.Value() >= int64(ids.Len()) {
			continue
		}
		if out == nil {
			out = maps.Clone(alloc)
		}
		out[corev1.ResourceName(name)] = *resource.NewQuantity(int64(ids.Len()), resource.DecimalSI)
	}
	if out == nil {
		return alloc
	}
	return out
}

// isDeviceResource reports whether a resource is a device plugin's: registered, or assigned to a pod. The
// caller holds the lock.
func (m *Manager) isDeviceResource(name string) bool {
	if _, ok := m.healthy[name]; ok {
		return true
	}
	_, ok := m.pods.inUse()[name]
	return ok
}

// deviceLimits are the device plugin resources a container asks for, by name, with the number of devices.
// The caller holds the lock.
func (m *Manager) deviceLimits(pod *corev1.Pod, c *corev1.Container) map[string]int {
	var out map[string]int
	for name, q := range c.Resources.Limits {
		// A resource the pod's extended resource claim serves gets the claim's devices (DRA), not a plugin's.
		if q.Value() == 0 || !m.isDeviceResource(string(name)) || podrules.BackedByDRA(pod, c.Name, name) {
			continue
		}
		if out == nil {
			out = map[string]int{}
		}
		out[string(name)] = int(q.Value())
	}
	return out
}

// plugin is the endpoint serving a resource now, or an error saying why there is none.
func (m *Manager) plugin(name string) (*endpoint, error) {
	ep, ok := m.endpoints[name]
	if !ok || ep.client == nil || !ep.stopped.IsZero() {
		return nil, fmt.Errorf("unknown Device Plugin %s", name)
	}
	return ep, nil
}

// AllocatableDevices are the healthy devices of every resource, for the pod resources API.
func (m *Manager) AllocatableDevices() map[string][]*pluginapi.Device {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]*pluginapi.Device{}
	for name, ids := range m.healthy {
		for _, id := range sets.List(ids) {
			if d := m.devices[name][id]; d != nil {
				out[name] = append(out[name], d)
			}
		}
	}
	return out
}

// ContainerDevices are a container's devices by resource name, for the pod resources API: the device IDs
// by NUMA node (nodeWithoutTopology for devices without topology).
func (m *Manager) ContainerDevices(podUID types.UID, container string) map[string]map[int64][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]map[int64][]string{}
	for name, cd := range m.pods[podUID][container] {
		out[name] = cd.ids
	}
	return out
}

// AllocatedResourcesStatus is the health of the devices given to a container, one entry per resource (the
// kubelet's allocatedResourcesStatus): a device its plugin lists as Healthy is Healthy, one it lists otherwise
// Unhealthy, one it does not list (not yet listed since a restart) Healthy, as with the kubelet.
func (m *Manager) AllocatedResourcesStatus(podUID types.UID, container string) []corev1.ResourceStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []corev1.ResourceStatus
	for _, name := range sortedKeys(m.pods[podUID][container]) {
		ids := sets.List(m.pods[podUID][container][name].all())
		if len(ids) == 0 {
			continue
		}
		rs := corev1.ResourceStatus{Name: corev1.ResourceName(name), Resources: []corev1.ResourceHealth{}}
		for _, id := range ids {
			health := corev1.ResourceHealthStatusHealthy
			if d, ok := m.devices[name][id]; ok && d.Health != pluginapi.Healthy {
				health = corev1.ResourceHealthStatusUnhealthy
			}
			rs.Resources = append(rs.Resources, corev1.ResourceHealth{ResourceID: corev1.ResourceID(id), Health: health})
		}
		out = append(out, rs)
	}
	return out
}

// sortedKeys lists a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// serveGRPC serves srv on lis until ctx ends.
func serveGRPC(ctx context.Context, srv *grpc.Server, lis net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		srv.Stop()
		if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return err
		}
		return nil
	case err := <-errc:
		return err
	}
}
