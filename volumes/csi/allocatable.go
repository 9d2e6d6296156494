package csi

import (
	"context"
	"maps"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/internal/periodic"
)

// allocatableCheckPeriod is how often the updater looks for drivers whose refresh is due.
const allocatableCheckPeriod = time.Second

// DriverWriter has a driver's state written into the CSINode object and the Node soon (NodeInfo).
type DriverWriter interface {
	Enqueue(driver string)
}

// AllocatableUpdater keeps the CSINode's allocatable volume count of each registered driver whose CSIDriver
// object sets spec.nodeAllocatableUpdatePeriodSeconds current, as the kubelet's CSI node updater: every such
// period (the first one period after it is seen) it asks the driver's NodeGetInfo again and has what changed
// — the volume limit, the node ID, the topology — written.
type AllocatableUpdater struct {
	Registry *Registry
	// CSIDrivers reads CSIDriver objects (a watch-fed cache: they are read every check).
	CSIDrivers client.Reader
	Writer     DriverWriter
	Clock      clock.WithTicker

	mu   sync.Mutex
	last map[string]time.Time // driver → when its refresh period last started
}

// Start checks the registered drivers every second until ctx ends.
func (u *AllocatableUpdater) Start(ctx context.Context) error {
	clk := u.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return periodic.Run(ctx, clk, nil, allocatableCheckPeriod, periodic.Measured(ctx, "csi-allocatable", func(ctx context.Context) { u.check(ctx, clk.Now()) }))
}

// check refreshes the registered drivers whose period has passed at now.
func (u *AllocatableUpdater) check(ctx context.Context, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.last == nil {
		u.last = map[string]time.Time{}
	}
	seen := map[string]bool{}
	for _, d := range u.Registry.Drivers() {
		seen[d.Name] = true
		period := u.period(ctx, d.Name)
		last, ok := u.last[d.Name]
		switch {
		case period == 0:
			delete(u.last, d.Name)
		case !ok:
			u.last[d.Name] = now
		case now.Sub(last) >= period:
			u.last[d.Name] = now
			u.Refresh(ctx, d.Name)
		}
	}
	for name := range maps.Clone(u.last) {
		if !seen[name] {
			delete(u.last, name)
		}
	}
}

// period is the driver's spec.nodeAllocatableUpdatePeriodSeconds, 0 when unset or unreadable.
func (u *AllocatableUpdater) period(ctx context.Context, driver string) time.Duration {
	obj := &storagev1.CSIDriver{}
	if err := u.CSIDrivers.Get(ctx, client.ObjectKey{Name: driver}, obj); err != nil {
		if !apierrors.IsNotFound(err) {
			logr.FromContextOrDiscard(ctx).Error(err, "Reading a CSIDriver failed", "driver", driver)
		}
		return 0
	}
	if p := obj.Spec.NodeAllocatableUpdatePeriodSeconds; p != nil && *p > 0 {
		return time.Duration(*p) * time.Second
	}
	return 0
}

// Refresh asks the registered driver's NodeGetInfo again and has its state written when it changed.
func (u *AllocatableUpdater) Refresh(ctx context.Context, driver string) {
	c, err := u.Registry.NodeClient(driver)
	if err != nil {
		return // de-registered meanwhile
	}
	info, err := c.NodeGetInfo(ctx)
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "NodeGetInfo of a CSI driver failed; its allocatable count is not updated", "driver", driver)
		return
	}
	if u.Registry.updateInfo(driver, c, info) {
		u.Writer.Enqueue(driver)
	}
}

// updateInfo sets what NodeGetInfo said of the driver registered with client c (not a newer registration)
// and reports whether it changed. An answer without a node ID changes nothing.
func (r *Registry) updateInfo(name string, c *Client, info *csipb.NodeGetInfoResponse) bool {
	if info.GetNodeId() == "" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.drivers[name]
	if !ok || d.client != c {
		return false
	}
	topology := info.GetAccessibleTopology().GetSegments()
	if d.NodeID == info.GetNodeId() && d.MaxVolumes == info.GetMaxVolumesPerNode() && maps.Equal(d.Topology, topology) {
		return false
	}
	updated := d.copy()
	updated.NodeID, updated.MaxVolumes, updated.Topology = info.GetNodeId(), info.GetMaxVolumesPerNode(), maps.Clone(topology)
	r.drivers[name] = &updated
	return true
}
