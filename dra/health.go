package dra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

// HealthStateFile is the devices' health as their drivers last reported it, in the root directory (the
// kubelet's dra_health_state).
const HealthStateFile = "dra_health_state"

// The kubelet's health timings: a device not reported within its timeout (30 s unless the driver gives
// one) is Unknown; a stream that ended is opened again 5 s later.
const (
	defaultHealthTimeout = 30 * time.Second
	healthRetry          = 5 * time.Second
	maxDevicesPerDriver  = 16384
)

// healthServices are the health services known, in the kubelet's order of preference.
var healthServices = []string{drahealthv1.DRAResourceHealthService, drahealthv1alpha1.DRAResourceHealthService}

// The health of a device, as the kubelet keeps it.
const (
	healthHealthy   = "Healthy"
	healthUnhealthy = "Unhealthy"
	healthUnknown   = "Unknown"
)

// deviceHealth is one device's last report; the field names are the kubelet's.
type deviceHealth struct {
	PoolName           string
	DeviceName         string
	Health             string
	LastUpdated        time.Time
	HealthCheckTimeout time.Duration
	Message            string
}

// driverHealth are a driver's devices by <pool>/<device>.
type driverHealth struct {
	Devices map[string]deviceHealth
}

// healthCache is the devices' health by driver, written to the health file on every change.
type healthCache struct {
	clock clock.PassiveClock
	path  string

	mu      sync.Mutex
	drivers map[string]driverHealth
}

// newHealthCache reads the health file; one that cannot be read is logged and the health is unknown, as
// with the kubelet.
func newHealthCache(path string, clk clock.PassiveClock, log logr.Logger) *healthCache {
	c := &healthCache{clock: clk, path: path, drivers: map[string]driverHealth{}}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &c.drivers)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Error(err, "Failed to load health checkpoint, proceeding with empty cache", "path", path)
		c.drivers = map[string]driverHealth{}
	}
	return c
}

// get is the device's health now: Unknown when it was never reported or its report is older than its
// timeout.
func (c *healthCache) get(driver, pool, device string) deviceHealth {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.drivers[driver].Devices[pool+"/"+device]
	if !ok || c.clock.Since(d.LastUpdated) > timeoutOf(d) {
		return deviceHealth{PoolName: pool, DeviceName: device, Health: healthUnknown}
	}
	return d
}

func timeoutOf(d deviceHealth) time.Duration {
	if d.HealthCheckTimeout == 0 {
		return defaultHealthTimeout
	}
	return d.HealthCheckTimeout
}

// update records a driver's report and returns the devices whose health changed: reported with another
// health, message or timeout, or not reported for longer than their timeout (then Unknown, and dropped).
func (c *healthCache) update(driver string, reported []deviceHealth, log logr.Logger) []deviceHealth {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	cur, ok := c.drivers[driver]
	if !ok {
		cur = driverHealth{Devices: map[string]deviceHealth{}}
		c.drivers[driver] = cur
	}
	var changed []deviceHealth
	seen := sets.New[string]()
	for _, d := range reported {
		d.LastUpdated = now
		k := d.PoolName + "/" + d.DeviceName
		seen.Insert(k)
		old, had := cur.Devices[k]
		if !had && len(cur.Devices) >= maxDevicesPerDriver {
			continue
		}
		if !had || old.Health != d.Health || old.Message != d.Message || old.HealthCheckTimeout != d.HealthCheckTimeout {
			changed = append(changed, d)
		}
		cur.Devices[k] = d
	}
	expired, deleted := expire(cur, seen, now)
	changed = append(changed, expired...)
	if len(changed) > 0 || deleted {
		if err := c.save(); err != nil {
			log.Error(err, "Failed to save health checkpoint after update. Kubelet restart may lose the device health information.")
		}
	}
	return changed
}

// expire drops the driver's devices not reported for longer than their timeout, and returns those that
// become Unknown by it; deleted says whether any was dropped.
func expire(cur driverHealth, seen sets.Set[string], now time.Time) (changed []deviceHealth, deleted bool) {
	for k, d := range cur.Devices {
		if seen.Has(k) || now.Sub(d.LastUpdated) <= timeoutOf(d) {
			continue
		}
		if d.Health != healthUnknown {
			d.Health, d.Message, d.LastUpdated = healthUnknown, "", now
			changed = append(changed, d)
		}
		delete(cur.Devices, k)
		deleted = true
	}
	return changed, deleted
}

// clear forgets a driver's devices (its stream ended).
func (c *healthCache) clear(driver string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.drivers, driver)
	return c.save()
}

// save writes the health file (c.mu held).
func (c *healthCache) save() error {
	b, err := json.Marshal(c.drivers)
	if err != nil {
		return err
	}
	return atomicfile.Write(c.path, b, 0o600)
}

// chooseHealthService is the first health service the plugin offers that this agent speaks ("": none).
func chooseHealthService(versions []string) string {
	for _, s := range healthServices {
		if slices.Contains(versions, s) {
			return s
		}
	}
	return ""
}

// watchHealth reads the plugin's health stream until ctx ends, opening it again 5 s after it ended; a
// plugin without the service (Unimplemented) is not asked again.
func (m *Manager) watchHealth(ctx context.Context, p *plugin, service string) {
	log := logr.FromContextOrDiscard(ctx).WithValues("driverName", p.driver, "endpoint", p.endpoint)
	for {
		err := m.readHealth(ctx, p, service, log)
		if status.Code(err) == codes.Unimplemented {
			log.V(1).Info("Driver does not support WatchResources health stream, stopping")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-m.clock.After(healthRetry):
		}
	}
}

// readHealth reads one health stream to its end, recording each report and having the pods whose devices
// changed health synced; the driver's devices are forgotten when it ends.
func (m *Manager) readHealth(ctx context.Context, p *plugin, service string, log logr.Logger) error {
	var (
		stream drahealthv1.DRAResourceHealth_NodeWatchResourcesClient
		err    error
	)
	if service == drahealthv1alpha1.DRAResourceHealthService {
		stream, err = drahealthv1.V1Alpha1ClientWrapper{Client: drahealthv1alpha1.NewDRAResourceHealthClient(p.conn)}.
			NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	} else {
		stream, err = drahealthv1.NewDRAResourceHealthClient(p.conn).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	}
	if err != nil {
		return err
	}
	defer func() {
		if err := m.health.clear(p.driver); err != nil {
			log.Error(err, "Failed to clear health info cache for driver")
		}
	}()
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		reported := make([]deviceHealth, 0, len(resp.GetDevices()))
		for _, d := range resp.GetDevices() {
			reported = append(reported, toDeviceHealth(d))
		}
		if changed := m.health.update(p.driver, reported, log); len(changed) > 0 && m.onHealthChange != nil {
			if uids := m.podsUsing(p.driver, changed); len(uids) > 0 {
				m.onHealthChange(uids)
			}
		}
	}
}

func toDeviceHealth(d *drahealthv1.DeviceHealth) deviceHealth {
	timeout := defaultHealthTimeout
	if s := d.GetHealthCheckTimeoutSeconds(); s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	health := healthUnknown
	switch d.GetHealth() {
	case drahealthv1.HealthStatus_HEALTHY:
		health = healthHealthy
	case drahealthv1.HealthStatus_UNHEALTHY:
		health = healthUnhealthy
	}
	msg := d.GetMessage()
	if len(msg) > corev1.ResourceHealthMessageMaxLength {
		msg = msg[:corev1.ResourceHealthMessageMaxLength-3] + "..."
	}
	return deviceHealth{PoolName: d.GetDevice().GetPoolName(), DeviceName: d.GetDevice().GetDeviceName(), Health: health,
		LastUpdated: time.Unix(d.GetLastUpdatedTime(), 0), HealthCheckTimeout: timeout, Message: msg}
}

// podsUsing are the pods holding a claim with one of the driver's devices.
func (m *Manager) podsUsing(driver string, devices []deviceHealth) []types.UID {
	keys := sets.New[string]()
	for _, d := range devices {
		keys.Insert(d.PoolName + "/" + d.DeviceName)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	uids := sets.New[types.UID]()
	for _, info := range m.claims {
		for _, d := range info.DriverState[driver].Devices {
			if keys.Has(d.PoolName + "/" + d.DeviceName) {
				for uid := range info.PodUIDs {
					uids.Insert(types.UID(uid))
				}
			}
		}
	}
	return sets.List(uids)
}

// AllocatedResourcesStatus is the health of the devices of the claims the container uses, one entry per
// claim (and request) it names, "claim:<name>" or "claim:<name>/<request>" — the kubelet's
// allocatedResourcesStatus of DRA devices. A device no health report covers is Unknown.
func (m *Manager) AllocatedResourcesStatus(pod *corev1.Pod, container string) []corev1.ResourceStatus {
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil || len(c.Resources.Claims) == 0 {
		return nil
	}
	var out []corev1.ResourceStatus
	for _, cc := range c.Resources.Claims {
		name := claimNameOf(pod, cc.Name)
		if name == "" {
			continue
		}
		rs := corev1.ResourceStatus{Name: corev1.ResourceName("claim:" + cc.Name)}
		if cc.Request != "" {
			rs.Name = corev1.ResourceName(fmt.Sprintf("claim:%s/%s", cc.Name, cc.Request))
		}
		rs.Resources = m.claimHealth(pod.Namespace, name, cc.Request)
		if len(rs.Resources) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// claimNameOf is the ResourceClaim's name of the pod's claim podClaim ("": none yet).
func claimNameOf(pod *corev1.Pod, podClaim string) string {
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == podClaim && s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	for i := range pod.Spec.ResourceClaims {
		if pod.Spec.ResourceClaims[i].Name == podClaim {
			if n, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i]); err == nil && n != nil {
				return *n
			}
		}
	}
	return ""
}

// claimHealth is the health of the claim's devices that serve the request ("": all of them).
func (m *Manager) claimHealth(namespace, claim, request string) []corev1.ResourceHealth {
	m.mu.Lock()
	info, ok := m.claims[key(namespace, claim)]
	type dev struct {
		driver string
		d      Device
	}
	var devs []dev
	if ok {
		for _, driver := range slices.Sorted(maps.Keys(info.DriverState)) {
			for _, d := range info.DriverState[driver].Devices {
				if request == "" || len(d.RequestNames) == 0 || slices.Contains(d.RequestNames, resourceclaim.BaseRequestRef(request)) {
					devs = append(devs, dev{driver, d})
				}
			}
		}
	}
	m.mu.Unlock()
	out := []corev1.ResourceHealth{}
	seen := sets.New[corev1.ResourceID]()
	for _, d := range devs {
		h := m.health.get(d.driver, d.d.PoolName, d.d.DeviceName)
		rh := corev1.ResourceHealth{Health: corev1.ResourceHealthStatus(h.Health)}
		if h.Message != "" {
			rh.Message = &h.Message
		}
		rh.ResourceID = corev1.ResourceID(fmt.Sprintf("%s/%s/%s", d.driver, d.d.PoolName, d.d.DeviceName))
		if len(d.d.CDIDeviceIDs) > 0 {
			rh.ResourceID = corev1.ResourceID(d.d.CDIDeviceIDs[0])
		}
		if !seen.Has(rh.ResourceID) {
			seen.Insert(rh.ResourceID)
			out = append(out, rh)
		}
	}
	return out
}
