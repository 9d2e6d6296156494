package dra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/podrules"
)

// Options configure a Manager. RootDir and NodeName are required.
type Options struct {
	// RootDir holds the checkpoint (<RootDir>/dra_manager_state).
	RootDir  string
	NodeName string
	// Reader reads ResourceClaims from the API server (not a cache: a claim's allocation and reservation
	// must be current); nil: no API server, and a pod with claims cannot be prepared.
	Reader client.Reader
	// Writer deletes this node's ResourceSlices of drivers gone; nil: none are deleted.
	Writer client.Writer
	// Clock times the deletion of a driver's slices (nil: the real clock).
	Clock clock.WithTicker
	// WipingDelay is how long a driver's slices stay after its last plugin went (0: 30 s).
	WipingDelay time.Duration
	// OnHealthChange is told of the pods whose devices' health changed (their status says it).
	OnHealthChange func(uids []types.UID)
	// Log logs what happens outside a caller's context (the health file at start).
	Log logr.Logger
}

// Manager prepares the pods' ResourceClaims with their drivers' plugins and gives containers the devices
// prepared, as the kubelet's DRA manager.
type Manager struct {
	reader         client.Reader
	plugins        *Plugins
	path           string
	clock          clock.WithTicker
	health         *healthCache
	onHealthChange func([]types.UID)
	metrics        *metrics

	// mu guards claims and the checkpoint, which is written with every change of claims.
	mu     sync.Mutex
	claims map[string]*claimInfo // by namespace/name
}

// claimInfo is a claim known to the node: its state as checkpointed, and where its preparation stands
// (a claim read back from the checkpoint is prepared again before a pod uses it: the call is idempotent).
type claimInfo struct {
	ClaimState
	prepared, unpreparing bool
}

// NewManager reads the checkpoint. A corrupt checkpoint is an error: the claims it names could be
// neither used nor released.
func NewManager(opts Options) (*Manager, error) {
	if opts.RootDir == "" || opts.NodeName == "" {
		return nil, errors.New("dra.NewManager: RootDir and NodeName are required")
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	m := &Manager{reader: opts.Reader, path: filepath.Join(opts.RootDir, StateFile), claims: map[string]*claimInfo{},
		plugins: newPlugins(opts.Writer, opts.NodeName, clk, opts.WipingDelay), clock: clk,
		health: newHealthCache(filepath.Join(opts.RootDir, HealthStateFile), clk, opts.Log), onHealthChange: opts.OnHealthChange,
		metrics: newMetrics()}
	m.plugins.watchHealth = m.watchHealth
	m.plugins.metrics = m.metrics
	states, err := readState(m.path)
	if err != nil {
		return nil, fmt.Errorf("%w (drain the node and remove the file)", err)
	}
	for _, s := range states {
		m.claims[key(s.Namespace, s.ClaimName)] = &claimInfo{ClaimState: s}
	}
	return m, nil
}

// Plugins is the handler of DRA plugins for the plugin watcher.
func (m *Manager) Plugins() *Plugins { return m.plugins }

// Start deletes the node's ResourceSlices left from before and runs until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	m.plugins.start(ctx)
	<-ctx.Done()
	return nil
}

func key(namespace, name string) string { return namespace + "/" + name }

// podClaim is one claim a pod uses: the ResourceClaim's name, and whether it was generated for the pod
// (then it must be owned by the pod).
type podClaim struct {
	claimName      string
	mustCheckOwner bool
}

// podClaims are the ResourceClaims the pod uses: those of spec.resourceClaims (the generated claims by the
// names the pod's status gives them) and the claim backing its DRA extended resources. A claim the pod's
// spec leaves out (a template that made none) is skipped; a generated claim not named yet is an error.
func podClaims(pod *corev1.Pod) ([]podClaim, error) {
	var out []podClaim
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, mustCheckOwner, err := resourceclaim.Name(pod, pc)
		if err != nil {
			return nil, err
		}
		if name != nil {
			out = append(out, podClaim{claimName: *name, mustCheckOwner: mustCheckOwner})
		}
	}
	if ext := pod.Status.ExtendedResourceClaimStatus; ext != nil {
		out = append(out, podClaim{claimName: ext.ResourceClaimName})
	}
	return out, nil
}

// HasClaims says whether the pod uses ResourceClaims at all.
func HasClaims(pod *corev1.Pod) bool {
	return len(pod.Spec.ResourceClaims) > 0 || pod.Status.ExtendedResourceClaimStatus != nil
}

// PrepareResources prepares the pod's claims that are not prepared yet, as the kubelet does before the
// pod's sandbox is made: each claim is read, must be allocated and reserved for the pod, and each of its
// drivers is asked once for all of the pod's claims it serves. The pod is recorded as a user of each
// claim before its driver is called, so a failure part-way is released like a success.
func (m *Manager) PrepareResources(ctx context.Context, pod *corev1.Pod) error {
	start := m.clock.Now()
	err := m.prepare(ctx, pod)
	m.observe("PrepareResources", start, err)
	if err != nil {
		return fmt.Errorf("prepare dynamic resources: %w", err)
	}
	return nil
}

func (m *Manager) prepare(ctx context.Context, pod *corev1.Pod) error {
	refs, err := podClaims(pod)
	if err != nil || len(refs) == 0 {
		return err
	}
	if m.reader == nil {
		return errors.New("no API server to read ResourceClaims from")
	}
	all := make([]fetchedClaim, 0, len(refs))
	for _, ref := range refs {
		f, err := m.fetch(ctx, pod, ref)
		if err != nil {
			return err
		}
		all = append(all, f)
	}
	batches, pending, err := m.recordPod(pod.UID, all)
	if err != nil {
		return err
	}
	for p, claims := range batches {
		if err := m.prepareWith(ctx, p, claims); err != nil {
			return err
		}
	}
	err = m.locked(func() error {
		for _, k := range pending {
			info, ok := m.claims[k]
			if !ok {
				return fmt.Errorf("internal error: unable to get claim info for ResourceClaim %s", k)
			}
			info.prepared = true
		}
		if err := m.checkpoint(); err != nil {
			return fmt.Errorf("checkpoint ResourceClaim state: %w", err)
		}
		return nil
	})
	if err == nil && len(pending) > 0 {
		logr.FromContextOrDiscard(ctx).V(1).Info("Prepared dynamic resources", "claims", len(pending))
	}
	return err
}

// fetchedClaim is a claim of a pod as read from the API server, what the node would keep of it, and the
// plugins of its drivers that prepare it.
type fetchedClaim struct {
	claim   *resourceapi.ResourceClaim
	info    *claimInfo
	plugins map[string]*plugin
}

// fetch reads the pod's claim and checks that the pod may use it: made for the pod (a generated claim),
// allocated, reserved for it, and each driver that prepares it registered.
func (m *Manager) fetch(ctx context.Context, pod *corev1.Pod, ref podClaim) (fetchedClaim, error) {
	claim := &resourceapi.ResourceClaim{}
	if err := m.reader.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.claimName}, claim); err != nil {
		return fetchedClaim{}, fmt.Errorf("fetch ResourceClaim %s: %w", ref.claimName, err)
	}
	if ref.mustCheckOwner {
		if err := resourceclaim.IsForPod(pod, claim, false); err != nil {
			return fetchedClaim{}, err
		}
	}
	if !resourceclaim.IsReservedForPod(pod, claim, false) {
		return fetchedClaim{}, fmt.Errorf("pod %s (%s) is not allowed to use ResourceClaim %s (%s)", pod.Name, pod.UID, claim.Name, claim.UID)
	}
	info, err := newClaimInfo(claim)
	if err != nil {
		return fetchedClaim{}, fmt.Errorf("ResourceClaim %s: %w", claim.Name, err)
	}
	f := fetchedClaim{claim: claim, info: info, plugins: map[string]*plugin{}}
	for driver, ds := range info.DriverState {
		if ds.skips(resourceapi.SkipNodeOperationNodePrepareResources) {
			continue
		}
		p, err := m.plugins.get(driver)
		if err != nil {
			return fetchedClaim{}, err
		}
		f.plugins[driver] = p
	}
	return f, nil
}

// recordPod records the pod as a user of each claim (checkpointed before any driver is called) and returns
// the claims still to prepare, by plugin, and their keys.
func (m *Manager) recordPod(uid types.UID, all []fetchedClaim) (map[*plugin][]*drapb.Claim, []string, error) {
	batches := map[*plugin][]*drapb.Claim{}
	var pending []string
	err := m.locked(func() error {
		for _, f := range all {
			k := key(f.claim.Namespace, f.claim.Name)
			info, ok := m.claims[k]
			switch {
			case !ok:
				info = f.info
				m.claims[k] = info
			case info.ClaimUID != f.claim.UID:
				return fmt.Errorf("old ResourceClaim with same name %s and different UID %s still exists (previous pod force-deleted?!)",
					f.claim.Name, info.ClaimUID)
			case info.unpreparing:
				return fmt.Errorf("ResourceClaim %s is being unprepared", f.claim.Name)
			}
			info.PodUIDs.Insert(string(uid))
			if err := m.checkpoint(); err != nil {
				return fmt.Errorf("checkpoint ResourceClaim cache: %w", err)
			}
			if info.prepared {
				continue
			}
			pending = append(pending, k)
			req := &drapb.Claim{Namespace: info.Namespace, Uid: string(info.ClaimUID), Name: info.ClaimName}
			for _, p := range f.plugins {
				batches[p] = append(batches[p], req)
			}
		}
		return nil
	})
	return batches, pending, err
}

// prepareWith asks the plugin to prepare the claims and records the devices it prepared for each.
func (m *Manager) prepareWith(ctx context.Context, p *plugin, claims []*drapb.Claim) error {
	resp, err := p.prepare(ctx, &drapb.NodePrepareResourcesRequest{Claims: claims})
	if err != nil {
		return fmt.Errorf("NodePrepareResources: %w", err)
	}
	for uid, result := range resp.Claims {
		req := findClaim(claims, uid)
		if req == nil {
			return fmt.Errorf("NodePrepareResources returned result for unknown claim UID %s", uid)
		}
		if result.GetError() != "" {
			return fmt.Errorf("NodePrepareResources failed for ResourceClaim %s: %s", req.Name, result.Error)
		}
		err := m.locked(func() error {
			info, ok := m.claims[key(req.Namespace, req.Name)]
			if !ok {
				return fmt.Errorf("internal error: unable to get claim info for ResourceClaim %s in namespace %s", req.Name, req.Namespace)
			}
			info.setDevices(p.driver, result.GetDevices())
			return nil
		})
		if err != nil {
			return err
		}
	}
	if unfinished := len(claims) - len(resp.Claims); unfinished != 0 {
		return fmt.Errorf("NodePrepareResources skipped %d ResourceClaims", unfinished)
	}
	return nil
}

// newClaimInfo is what the node keeps of an allocated claim: its drivers (from the allocation's results)
// and the node operations each skips.
func newClaimInfo(claim *resourceapi.ResourceClaim) (*claimInfo, error) {
	if claim.Status.Allocation == nil {
		return nil, errors.New("not allocated")
	}
	devices := map[string]int{}
	skips := map[string]map[resourceapi.SkipNodeOperation]int{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		devices[r.Driver]++
		if len(r.SkipNodeOperations) == 0 {
			continue
		}
		if skips[r.Driver] == nil {
			skips[r.Driver] = map[resourceapi.SkipNodeOperation]int{}
		}
		if slices.Contains(r.SkipNodeOperations, resourceapi.SkipNodeOperationAll) {
			skips[r.Driver][resourceapi.SkipNodeOperationAll]++
			continue
		}
		for _, op := range r.SkipNodeOperations {
			skips[r.Driver][op]++
		}
	}
	states := make(map[string]DriverState, len(devices))
	for driver, total := range devices {
		// A node operation is skipped for a driver when every device of it skips it. Skipping is the
		// alpha DRAOptionalNodeOperations feature, off in the kubelet by default: such a claim is refused.
		counts := skips[driver]
		all := counts[resourceapi.SkipNodeOperationAll]
		skipped := all == total && all > 0
		for op, n := range counts {
			if op != resourceapi.SkipNodeOperationAll && n+all == total {
				skipped = true
			}
		}
		if skipped {
			return nil, errors.New("DRAOptionalNodeOperations feature gate is disabled on kubelet")
		}
		states[driver] = DriverState{}
	}
	return &claimInfo{ClaimState: ClaimState{ClaimUID: claim.UID, ClaimName: claim.Name, Namespace: claim.Namespace,
		PodUIDs: sets.New[string](), DriverState: states}}, nil
}

func (s DriverState) skips(op resourceapi.SkipNodeOperation) bool {
	return slices.Contains(s.SkipNodeOperations, resourceapi.SkipNodeOperationAll) || slices.Contains(s.SkipNodeOperations, op)
}

// setDevices records what the driver prepared, in place of what it had before.
func (info *claimInfo) setDevices(driver string, devices []*drapb.Device) {
	ds := info.DriverState[driver]
	ds.Devices = nil
	for _, d := range devices {
		ds.Devices = append(ds.Devices, Device{PoolName: d.PoolName, DeviceName: d.DeviceName,
			ShareID: (*types.UID)(d.ShareId), RequestNames: d.RequestNames, CDIDeviceIDs: d.CdiDeviceIds})
	}
	if info.DriverState == nil {
		info.DriverState = map[string]DriverState{}
	}
	info.DriverState[driver] = ds
}

// cdiDevices are the CDI device IDs of the devices prepared for the request ("": every request); a device
// that names no request serves them all.
func (info *claimInfo) cdiDevices(request string) []string {
	var ids []string
	for _, driver := range slices.Sorted(maps.Keys(info.DriverState)) {
		for _, d := range info.DriverState[driver].Devices {
			if request == "" || len(d.RequestNames) == 0 || slices.Contains(d.RequestNames, request) {
				ids = append(ids, d.CDIDeviceIDs...)
			}
		}
	}
	return ids
}

func findClaim(claims []*drapb.Claim, uid string) *drapb.Claim {
	for _, c := range claims {
		if c.Uid == uid {
			return c
		}
	}
	return nil
}

// CDIDevices are the CDI devices of the claims the container names in resources.claims (each with its
// request, or all of the claim's), and of the claim backing its DRA extended resources, as the container's
// CRI config takes them. The claims must have been prepared.
func (m *Manager) CDIDevices(pod *corev1.Pod, c *corev1.Container) ([]*runtimeapi.CDIDevice, error) {
	order, requests, err := containerClaims(pod, c)
	if err != nil || len(order) == 0 {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*runtimeapi.CDIDevice
	for _, claim := range order {
		info, ok := m.claims[key(pod.Namespace, claim)]
		if !ok {
			return nil, fmt.Errorf("internal error: unable to get claim info for ResourceClaim %s in namespace %s", claim, pod.Namespace)
		}
		for _, req := range requests[claim] {
			for _, id := range info.cdiDevices(req) {
				out = append(out, &runtimeapi.CDIDevice{Name: id})
			}
		}
	}
	return out, nil
}

// containerClaims are the claims the container uses, in the pod's order, with the requests it names of
// each ("": all of the claim's).
func containerClaims(pod *corev1.Pod, c *corev1.Container) (order []string, requests map[string][]string, _ error) {
	requests = map[string][]string{}
	add := func(claim string, reqs ...string) {
		if _, ok := requests[claim]; !ok {
			order = append(order, claim)
		}
		requests[claim] = append(requests[claim], reqs...)
	}
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		var reqs []string
		for _, cc := range c.Resources.Claims {
			if cc.Name == pc.Name {
				reqs = append(reqs, cc.Request)
			}
		}
		if len(reqs) == 0 {
			continue
		}
		name, _, err := resourceclaim.Name(pod, pc)
		if err != nil {
			return nil, nil, err
		}
		if name != nil {
			add(*name, reqs...)
		}
	}
	if ext := pod.Status.ExtendedResourceClaimStatus; ext != nil {
		for _, rm := range ext.RequestMappings {
			name := corev1.ResourceName(rm.ResourceName)
			if q, ok := c.Resources.Requests[name]; rm.ContainerName == c.Name && ok && !q.IsZero() && podrules.BackedByDRA(pod, c.Name, name) {
				add(ext.ResourceClaimName, rm.RequestName)
			}
		}
	}
	return order, requests, nil
}

// UnprepareResources releases the pod's claims once none of its containers runs, as the kubelet does
// before the pod's final status: a claim no other pod of the node uses is unprepared by its drivers and
// forgotten. The claims are those recorded for the pod's UID (a pod is recorded before any driver is
// called), so a pod the API no longer has is released as well.
func (m *Manager) UnprepareResources(ctx context.Context, uid types.UID) error {
	m.mu.Lock()
	var names []types.NamespacedName
	for _, info := range m.claims {
		if info.PodUIDs.Has(string(uid)) {
			names = append(names, types.NamespacedName{Namespace: info.Namespace, Name: info.ClaimName})
		}
	}
	m.mu.Unlock()
	start := m.clock.Now()
	var err error
	if len(names) > 0 {
		err = m.unprepare(ctx, uid, names)
	}
	m.observe("UnprepareResources", start, err)
	if err != nil {
		return fmt.Errorf("unprepare dynamic resources: %w", err)
	}
	return nil
}

func (m *Manager) unprepare(ctx context.Context, uid types.UID, names []types.NamespacedName) error {
	batches, release, err := m.releasePod(uid, names)
	if err != nil {
		return err
	}
	for driver, claims := range batches {
		if err := m.unprepareWith(ctx, driver, claims); err != nil {
			return err
		}
	}
	if len(release) == 0 {
		return nil
	}
	err = m.locked(func() error {
		for _, k := range release {
			delete(m.claims, k)
		}
		return m.checkpoint()
	})
	if err == nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("Unprepared dynamic resources", "claims", len(release))
	}
	return err
}

// releasePod takes the pod off the claims it shares with other pods, and returns those it alone used —
// to unprepare, by driver, and their keys, to forget once unprepared.
func (m *Manager) releasePod(uid types.UID, names []types.NamespacedName) (map[string][]*drapb.Claim, []string, error) {
	batches := map[string][]*drapb.Claim{}
	var release []string
	err := m.locked(func() error {
		for _, n := range names {
			k := key(n.Namespace, n.Name)
			info, ok := m.claims[k]
			if !ok || !info.PodUIDs.Has(string(uid)) {
				continue
			}
			if info.PodUIDs.Len() > 1 {
				info.PodUIDs.Delete(string(uid))
				continue
			}
			release = append(release, k)
			info.unpreparing = true
			req := &drapb.Claim{Namespace: info.Namespace, Uid: string(info.ClaimUID), Name: info.ClaimName}
			for driver, ds := range info.DriverState {
				if !ds.skips(resourceapi.SkipNodeOperationNodeUnprepareResources) {
					batches[driver] = append(batches[driver], req)
				}
			}
		}
		return m.checkpoint()
	})
	return batches, release, err
}

// unprepareWith asks the driver's plugin to unprepare the claims.
func (m *Manager) unprepareWith(ctx context.Context, driver string, claims []*drapb.Claim) error {
	p, err := m.plugins.get(driver)
	if err != nil {
		return err
	}
	resp, err := p.unprepare(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: claims})
	if err != nil {
		return fmt.Errorf("NodeUnprepareResources: %w", err)
	}
	for uid, result := range resp.Claims {
		req := findClaim(claims, uid)
		if req == nil {
			return fmt.Errorf("NodeUnprepareResources returned result for unknown claim UID %s", uid)
		}
		if result.GetError() != "" {
			return fmt.Errorf("NodeUnprepareResources failed for ResourceClaim %s: %s", req.Name, result.Error)
		}
	}
	if unfinished := len(claims) - len(resp.Claims); unfinished != 0 {
		return fmt.Errorf("NodeUnprepareResources skipped %d ResourceClaims", unfinished)
	}
	return nil
}

// MightNeedToUnprepare says whether claims are still recorded for the pod: its deletion from the API
// waits until they are released.
func (m *Manager) MightNeedToUnprepare(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, info := range m.claims {
		if info.PodUIDs.Has(string(uid)) {
			return true
		}
	}
	return false
}

// UnprepareOrphans releases the claims of pods that are not active (the kubelet's reconcile loop): pods
// deleted while the agent was down, or whose release failed.
func (m *Manager) UnprepareOrphans(ctx context.Context, active func(types.UID) bool) error {
	byPod := map[types.UID][]types.NamespacedName{}
	m.mu.Lock()
	for _, info := range m.claims {
		for uid := range info.PodUIDs {
			if !active(types.UID(uid)) {
				byPod[types.UID(uid)] = append(byPod[types.UID(uid)], types.NamespacedName{Namespace: info.Namespace, Name: info.ClaimName})
			}
		}
	}
	m.mu.Unlock()
	var errs []error
	for uid, names := range byPod {
		if err := m.unprepare(ctx, uid, names); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", uid, err))
		}
	}
	return errors.Join(errs...)
}

// locked runs f with m.mu held.
func (m *Manager) locked(f func() error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return f()
}

// checkpoint writes the claims to the checkpoint (m.mu held).
func (m *Manager) checkpoint() error {
	states := make([]ClaimState, 0, len(m.claims))
	for _, k := range slices.Sorted(maps.Keys(m.claims)) {
		states = append(states, m.claims[k].ClaimState)
	}
	return writeState(m.path, states)
}
