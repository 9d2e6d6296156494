package csi

import (
	"context"
	"path/filepath"

	"sync"

	"github.com/go-logr/logr"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RegistrationDir is where plugins put their registration sockets, under the root dir.
const RegistrationDir = "plugins_registry"

// Options configure a Manager.
type Options struct {
	// RootDir is the agent's root dir: plugin sockets are watched in <RootDir>/plugins_registry.
	RootDir  string
	NodeName string
	// Reader and Writer reach the API server for the CSINode object and the Node (Reader must not be a
	// cache); nil Reader: no API server, nothing is written.
	Reader client.Reader
	Writer client.Writer
	// CSIDrivers reads CSIDriver objects (a watch-fed cache); with Reader, drivers whose CSIDriver sets
	// spec.nodeAllocatableUpdatePeriodSeconds get their allocatable count refreshed (AllocatableUpdater).
	CSIDrivers client.Reader
	// Clock times retries (nil: the real clock).
	Clock clock.WithTicker
	// Handlers register the plugins of other types than CSIPlugin (DRAPlugin) through the same watcher.
	Handlers map[string]Handler
}

// Manager is the node side of CSI: the plugin watcher with the CSI registration handler, the registry of
// drivers, and the CSINode object and Node kept in line with them.
type Manager struct {
	registry    *Registry
	watcher     *PluginWatcher
	nodeInfo    *NodeInfo
	allocatable *AllocatableUpdater
}

// New wires a Manager; nothing runs until Start.
func New(opts Options) *Manager {
	m := &Manager{registry: NewRegistry()}
	h := &RegistrationHandler{Registry: m.registry}
	if opts.Reader != nil {
		m.nodeInfo = NewNodeInfo(opts.Reader, opts.Writer, opts.NodeName, m.registry, opts.Clock)
		h.NodeInfo = m.nodeInfo
		if opts.CSIDrivers != nil {
			m.allocatable = &AllocatableUpdater{Registry: m.registry, CSIDrivers: opts.CSIDrivers, Writer: m.nodeInfo, Clock: opts.Clock}
		}
	}
	handlers := map[string]Handler{registerapi.CSIPlugin: h}
	for t, oh := range opts.Handlers {
		if t != registerapi.CSIPlugin {
			handlers[t] = oh
		}
	}
	m.watcher = &PluginWatcher{
		Dir:      filepath.Join(opts.RootDir, RegistrationDir),
		Handlers: handlers,
		Clock:    opts.Clock,
	}
	return m
}

// RefreshDriver asks the registered driver's NodeGetInfo again and has what changed written (the
// AllocatableUpdater's Refresh); without an API server it does nothing.
func (m *Manager) RefreshDriver(ctx context.Context, driver string) {
	if m.allocatable != nil {
		m.allocatable.Refresh(ctx, driver)
	}
}

// Registry is the CSI drivers registered on this node.
func (m *Manager) Registry() *Registry { return m.registry }

// Start runs the plugin watcher, the CSINode writer and the allocatable count updater until ctx ends. A watcher that cannot start (its
// directory cannot be made or watched) is logged, as the kubelet does: the node runs on without CSI
// drivers.
func (m *Manager) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	if m.nodeInfo != nil {
		wg.Go(func() { _ = m.nodeInfo.Start(ctx) })
	}
	if m.allocatable != nil {
		wg.Go(func() { _ = m.allocatable.Start(ctx) })
	}
	if err := m.watcher.Start(ctx); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "The plugin watcher failed to start; no CSI driver can register")
	}
	wg.Wait()
	return nil
}
