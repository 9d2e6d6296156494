package devices

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// endpoint is a device plugin the manager dialed back: its resource, socket, options and client. stopped is
// when it went away (zero while it serves); a resource read back from the checkpoint has an endpoint that
// went away at start.
type endpoint struct {
	resource string
	socket   string
	conn     *grpc.ClientConn
	client   pluginapi.DevicePluginClient
	opts     *pluginapi.DevicePluginOptions
	stopped  time.Time
}

// expired reports whether the plugin has been gone longer than the grace period.
func (e *endpoint) expired(now time.Time) bool {
	return !e.stopped.IsZero() && now.Sub(e.stopped) > stopGracePeriod
}

// connect dials a registered plugin and asks for its options.
func connect(ctx context.Context, dir string, r *pluginapi.RegisterRequest) (*endpoint, error) {
	socket := filepath.Join(dir, r.Endpoint)
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("failed to dial device plugin: %w", err)
	}
	client := pluginapi.NewDevicePluginClient(conn)
	cctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	opts, err := client.GetDevicePluginOptions(cctx, &pluginapi.Empty{}, grpc.WaitForReady(true))
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("failed to get device plugin options: %w", err)
	}
	return &endpoint{resource: r.ResourceName, socket: socket, conn: conn, client: client, opts: opts}, nil
}

// addEndpoint makes a connected plugin its resource's endpoint: a plugin registered again on another socket
// replaces the one before (whose stream is closed), one on the same socket while that one serves is an
// error.
func (m *Manager) addEndpoint(ep *endpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.endpoints[ep.resource]
	if old != nil && old.conn != nil && old.stopped.IsZero() {
		if old.socket == ep.socket {
			return fmt.Errorf("device plugin already connected: %s", ep.socket)
		}
		_ = old.conn.Close()
	}
	m.endpoints[ep.resource] = ep
	return nil
}

// follow reads a plugin's device lists until its stream or ctx ends; then, if it still is the resource's
// endpoint, the resource's devices turn unhealthy and the grace period starts.
func (m *Manager) follow(ctx context.Context, ep *endpoint) {
	defer ep.conn.Close() //nolint:errcheck // closing a connection that served
	err := m.listAndWatch(ctx, ep)
	m.mu.Lock()
	current := m.endpoints[ep.resource] == ep
	if current {
		ep.stopped = m.clock.Now()
		m.markUnhealthy(ep.resource)
	}
	m.mu.Unlock()
	if !current {
		return
	}
	m.log.Info("ListAndWatch ended unexpectedly for device plugin", "resourceName", ep.resource, "socket", ep.socket, "err", fmt.Sprint(err))
	m.onChange()
}

// listAndWatch follows a plugin's device list until its stream ends.
func (m *Manager) listAndWatch(ctx context.Context, ep *endpoint) error {
	stream, err := ep.client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		m.updateDevices(ep, resp.Devices)
	}
}

// updateDevices takes a plugin's device list: the resource's healthy and unhealthy devices are what it says.
func (m *Manager) updateDevices(ep *endpoint, list []*pluginapi.Device) {
	m.mu.Lock()
	if m.endpoints[ep.resource] != ep {
		m.mu.Unlock()
		return
	}
	healthy, unhealthy := sets.New[string](), sets.New[string]()
	devices := make(map[string]*pluginapi.Device, len(list))
	changed := sets.New[types.UID]()
	for _, d := range list {
		if old, ok := m.devices[ep.resource][d.ID]; !ok || old.Health != d.Health {
			if uid, ok := m.pods.holder(ep.resource, d.ID); ok {
				changed.Insert(uid)
			}
		}
		devices[d.ID] = d
		if d.Health == pluginapi.Healthy {
			healthy.Insert(d.ID)
		} else {
			unhealthy.Insert(d.ID)
		}
	}
	m.healthy[ep.resource], m.unhealthy[ep.resource], m.devices[ep.resource] = healthy, unhealthy, devices
	m.writeCheckpoint()
	m.mu.Unlock()
	m.log.V(2).Info("Devices updated", "resourceName", ep.resource, "healthy", healthy.Len(), "unhealthy", unhealthy.Len())
	m.onChange()
	if changed.Len() > 0 {
		m.onHealthChange(sets.List(changed))
	}
}

// markUnhealthy turns every device of a resource unhealthy (its plugin went away). The caller holds the lock.
func (m *Manager) markUnhealthy(name string) {
	if m.unhealthy[name] == nil {
		m.unhealthy[name] = sets.New[string]()
	}
	m.unhealthy[name] = m.unhealthy[name].Union(m.healthy[name])
	m.healthy[name] = sets.New[string]()
}
