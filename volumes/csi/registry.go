package csi

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Driver is a CSI driver registered on this node: where its node service listens and what its
// NodeGetInfo said.
type Driver struct {
	// Name is the driver's name (its CSIDriver object's, and the CSINode entry's).
	Name string
	// Endpoint is the unix socket of the driver's CSI services.
	Endpoint string
	// NodeID is this node's ID for the driver (NodeGetInfo's node_id).
	NodeID string
	// MaxVolumes is how many of the driver's volumes this node may have published; 0: no limit.
	MaxVolumes int64
	// Topology is the node's accessible topology segments (NodeGetInfo's accessible_topology).
	Topology map[string]string
	// Versions are the CSI versions the plugin said it supports; HighestVersion the highest 1.x of them.
	Versions       []string
	HighestVersion string

	client *Client
}

// Registry is the CSI drivers registered on this node, by name. It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	drivers map[string]*Driver
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{drivers: map[string]*Driver{}} }

// Get returns the registered driver name.
func (r *Registry) Get(name string) (Driver, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d, ok := r.drivers[name]
	if !ok {
		return Driver{}, false
	}
	return d.copy(), true
}

// Drivers returns the registered drivers, sorted by name.
func (r *Registry) Drivers() []Driver {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Driver, 0, len(r.drivers))
	for _, name := range slices.Sorted(maps.Keys(r.drivers)) {
		out = append(out, r.drivers[name].copy())
	}
	return out
}

// NodeClient returns the node service of the registered driver name, with the kubelet's error when it
// is not registered. The client lives as long as the registration: a driver registered again gets a new
// one (its capabilities asked again).
func (r *Registry) NodeClient(name string) (*Client, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d, ok := r.drivers[name]
	if !ok {
		return nil, fmt.Errorf("driver name %s not found in the list of registered CSI drivers", name)
	}
	return d.client, nil
}

// set registers d in place of any driver of the same name and returns the one it replaced.
func (r *Registry) set(d Driver) (Driver, bool) {
	d = d.copy()
	if d.client == nil {
		d.client = NewClient(d.Name, d.Endpoint)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.drivers[d.Name]
	r.drivers[d.Name] = &d
	if !ok {
		return Driver{}, false
	}
	return *old, true
}

// restore puts back prev, the registration set replaced (had says whether there was one), if name is
// still registered at endpoint.
func (r *Registry) restore(name, endpoint string, prev Driver, had bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.drivers[name]; !ok || cur.Endpoint != endpoint {
		return
	}
	if had {
		r.drivers[name] = &prev
		return
	}
	delete(r.drivers, name)
}

// remove de-registers name if it is registered at endpoint (a newer registration of the name at another
// endpoint stays) and reports whether it did.
func (r *Registry) remove(name, endpoint string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.drivers[name]; !ok || cur.Endpoint != endpoint {
		return false
	}
	delete(r.drivers, name)
	return true
}

// copy is d with its own maps and slices (the client is shared: it is the registration's).
func (d *Driver) copy() Driver {
	c := *d
	c.Topology = maps.Clone(d.Topology)
	c.Versions = slices.Clone(d.Versions)
	return c
}
