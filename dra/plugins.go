package dra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpcstats "google.golang.org/grpc/stats"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The kubelet's DRA timings: each call to a plugin, and the time a driver's ResourceSlices stay after its
// last plugin went away.
const (
	callTimeout        = 45 * time.Second
	defaultWipingDelay = 30 * time.Second
)

// servicesSupported are the plugin services known, in the kubelet's order of preference.
var servicesSupported = []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService}

// Plugins are the registered DRA plugins by driver name, as the kubelet's DRA plugin manager: the
// plugin watcher's handler of the DRAPlugin type.
type Plugins struct {
	client      client.Writer
	nodeName    string
	clock       clock.WithTicker
	wipingDelay time.Duration

	mu     sync.Mutex
	ctx    context.Context
	store  map[string][]*plugin // by driver: oldest first
	wipes  map[string]*pendingWipe
	log    logr.Logger
	closed bool
	// onSync, when set, is told of each sync of a driver: whether a plugin of it is connected (tests).
	onSync func(driver string, usable bool)
	// watchHealth, when set, reads the health stream of a plugin that offers a health service until its
	// context ends (the plugin de-registered).
	watchHealth func(ctx context.Context, p *plugin, service string)
	// metrics, when set, times the calls to the plugins.
	metrics *metrics
}

// pendingWipe is a driver's ResourceSlices to be deleted: cancel stops the wait, or the deletion going on.
type pendingWipe struct {
	cancel context.CancelFunc
}

// plugin is one registered plugin of a driver and its connection.
type plugin struct {
	driver, endpoint string
	service          string
	conn             *grpc.ClientConn
	ps               *Plugins

	// connected is whether its connection is up (Plugins.mu).
	connected bool
	// stopHealth ends the reading of its health stream (nil: none); healthDone is closed when that
	// reading has returned (its last write of the health file included).
	stopHealth context.CancelFunc
	healthDone chan struct{}
}

// newPlugins makes the plugin store; writer nil: no ResourceSlices are deleted.
func newPlugins(writer client.Writer, nodeName string, clk clock.WithTicker, wipingDelay time.Duration) *Plugins {
	if wipingDelay <= 0 {
		wipingDelay = defaultWipingDelay
	}
	return &Plugins{client: writer, nodeName: nodeName, clock: clk, wipingDelay: wipingDelay,
		ctx: context.Background(), store: map[string][]*plugin{}, wipes: map[string]*pendingWipe{}, log: logr.Discard()}
}

// start deletes the node's ResourceSlices (no plugin has published this run's) and makes ctx the
// context of later deletions; it returns at once.
func (ps *Plugins) start(ctx context.Context) {
	ps.mu.Lock()
	ps.ctx, ps.log = ctx, logr.FromContextOrDiscard(ctx).WithName("dra-plugins")
	ps.mu.Unlock()
	go ps.wipe(ctx, "")
	go func() {
		<-ctx.Done()
		ps.stop()
	}()
}

// stop closes every connection and cancels the pending deletions.
func (ps *Plugins) stop() {
	var conns []*grpc.ClientConn
	ps.mu.Lock()
	ps.closed = true
	stopped := maps.Clone(ps.store)
	for driver, w := range ps.wipes {
		w.stop()
		delete(ps.wipes, driver)
	}
	for _, plugins := range ps.store {
		for _, p := range plugins {
			p.endHealth()
			conns = append(conns, p.conn)
		}
	}
	ps.mu.Unlock()
	// Closed without the lock: a connection's end is reported to HandleConn, which takes it.
	for _, c := range conns {
		_ = c.Close()
	}
	for _, plugins := range stopped {
		for _, p := range plugins {
			p.waitHealth()
		}
	}
}

func (w *pendingWipe) stop() { w.cancel() }

// ValidatePlugin checks that the plugin offers a service this agent speaks.
func (ps *Plugins) ValidatePlugin(_ context.Context, driver, endpoint string, versions []string) error {
	if _, err := chooseService(versions); err != nil {
		return fmt.Errorf("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w", driver, endpoint, err)
	}
	return nil
}

// RegisterPlugin connects to the plugin and makes it its driver's newest.
func (ps *Plugins) RegisterPlugin(ctx context.Context, driver, endpoint string, versions []string) error {
	service, err := chooseService(versions)
	if err != nil {
		return fmt.Errorf("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w", driver, endpoint, err)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return errors.New("DRA plugin manager stopped")
	}
	for _, old := range ps.store[driver] {
		if old.endpoint == endpoint {
			return fmt.Errorf("endpoint %s already registered for DRA driver plugin %s", endpoint, driver)
		}
	}
	p := &plugin{driver: driver, endpoint: endpoint, service: service, ps: ps}
	dialOpts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithStatsHandler(p)}
	if ps.metrics != nil {
		dialOpts = append(dialOpts, grpc.WithUnaryInterceptor(ps.metrics.interceptor(driver)))
	}
	conn, err := grpc.NewClient("unix:"+endpoint, dialOpts...)
	if err != nil {
		return fmt.Errorf("create gRPC connection to DRA driver %s plugin at endpoint %s: %w", driver, endpoint, err)
	}
	p.conn = conn
	conn.Connect()
	if hs := chooseHealthService(versions); hs != "" && ps.watchHealth != nil {
		hctx, cancel := context.WithCancel(ps.ctx)
		p.stopHealth, p.healthDone = cancel, make(chan struct{})
		go func() {
			defer close(p.healthDone)
			ps.watchHealth(hctx, p, hs)
		}()
	}
	ps.store[driver] = append(ps.store[driver], p)
	logr.FromContextOrDiscard(ctx).Info("Registered DRA plugin", "driverName", driver, "endpoint", endpoint,
		"chosenService", service, "numPlugins", len(ps.store[driver]))
	ps.sync(driver)
	return nil
}

// DeRegisterPlugin forgets the plugin at endpoint; the driver's slices go 30 s after its last plugin.
func (ps *Plugins) DeRegisterPlugin(ctx context.Context, driver, endpoint string) {
	ps.mu.Lock()
	plugins := ps.store[driver]
	i := slices.IndexFunc(plugins, func(p *plugin) bool { return p.endpoint == endpoint })
	if i < 0 {
		ps.mu.Unlock()
		return
	}
	p := plugins[i]
	if len(plugins) == 1 {
		delete(ps.store, driver)
	} else {
		ps.store[driver] = slices.Delete(plugins, i, i+1)
	}
	p.endHealth()
	logr.FromContextOrDiscard(ctx).Info("Unregistered DRA plugin", "driverName", driver, "endpoint", endpoint,
		"numPlugins", len(ps.store[driver]))
	ps.sync(driver)
	ps.mu.Unlock()
	// Closed without the lock: a connection's end is reported to HandleConn, which takes it.
	_ = p.conn.Close()
	p.waitHealth()
}

// endHealth stops reading the plugin's health stream.
func (p *plugin) endHealth() {
	if p.stopHealth != nil {
		p.stopHealth()
	}
}

// waitHealth waits until the reading of the plugin's health stream, once ended, has returned.
func (p *plugin) waitHealth() {
	if p.healthDone != nil {
		<-p.healthDone
	}
}

// chooseService is the first service the plugin offers that this agent speaks.
func chooseService(versions []string) (string, error) {
	if len(versions) == 0 {
		return "", errors.New("empty list of supported gRPC services (aka supported versions)")
	}
	for _, v := range versions {
		if slices.Contains(servicesSupported, v) {
			return v, nil
		}
	}
	return "", fmt.Errorf("none of services supported by the plugin (%q) are supported by the kubelet (%q)", versions, servicesSupported)
}

// get is the driver's plugin to call: the newest connected one, else the newest.
func (ps *Plugins) get(driver string) (*plugin, error) {
	if driver == "" {
		return nil, errors.New("DRA driver name is empty")
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	plugins := ps.store[driver]
	if len(plugins) == 0 {
		return nil, fmt.Errorf("DRA driver %s is not registered", driver)
	}
	for i := len(plugins) - 1; i >= 0; i-- {
		if plugins[i].connected {
			return plugins[i], nil
		}
	}
	return plugins[len(plugins)-1], nil
}

// Registered are the drivers with a registered plugin.
func (ps *Plugins) Registered() []string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var drivers []string
	for d := range ps.store {
		drivers = append(drivers, d)
	}
	slices.Sort(drivers)
	return drivers
}

// sync schedules the deletion of the driver's slices when no plugin of it is connected, and cancels it when
// one is (ps.mu held).
func (ps *Plugins) sync(driver string) {
	if ps.client == nil || ps.closed {
		return
	}
	usable := slices.ContainsFunc(ps.store[driver], func(p *plugin) bool { return p.connected })
	if ps.onSync != nil {
		defer ps.onSync(driver, usable)
	}
	w, pending := ps.wipes[driver]
	switch {
	case usable && pending:
		w.stop()
		delete(ps.wipes, driver)
	case !usable && !pending:
		ctx, cancel := context.WithCancel(ps.ctx)
		w := &pendingWipe{cancel: cancel}
		timer := ps.clock.NewTimer(ps.wipingDelay)
		go func() {
			defer timer.Stop()
			select {
			case <-timer.C():
				ps.wipe(ctx, driver)
			case <-ctx.Done():
				return
			}
			ps.mu.Lock()
			if ps.wipes[driver] == w {
				delete(ps.wipes, driver)
			}
			ps.mu.Unlock()
		}()
		ps.wipes[driver] = w
	}
}

// wipe deletes this node's ResourceSlices of the driver ("": of every driver), retrying with a back-off
// (1 s doubling to 5 min) until it succeeds or ctx ends.
func (ps *Plugins) wipe(ctx context.Context, driver string) {
	if ps.client == nil {
		return
	}
	log := logr.FromContextOrDiscard(ctx).WithName("dra-plugins")
	sel := fields.Set{resourceapi.ResourceSliceSelectorNodeName: ps.nodeName}
	if driver != "" {
		sel[resourceapi.ResourceSliceSelectorDriver] = driver
	}
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Cap: 5 * time.Minute, Steps: 100}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		err := ps.client.DeleteAllOf(ctx, &resourceapi.ResourceSlice{}, client.MatchingFieldsSelector{Selector: sel.AsSelector()})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			log.V(1).Info("Deleted ResourceSlices", "fieldSelector", sel.String())
			return true, nil
		default:
			log.V(1).Info("Deleting ResourceSlices failed, retrying", "fieldSelector", sel.String(), "err", err)
			return false, nil
		}
	})
}

// TagRPC is part of grpc's stats.Handler.
func (p *plugin) TagRPC(ctx context.Context, _ *grpcstats.RPCTagInfo) context.Context { return ctx }

// HandleRPC is part of grpc's stats.Handler.
func (p *plugin) HandleRPC(context.Context, grpcstats.RPCStats) {}

// TagConn is part of grpc's stats.Handler.
func (p *plugin) TagConn(ctx context.Context, _ *grpcstats.ConnTagInfo) context.Context { return ctx }

// HandleConn records whether the plugin's connection is up, and reconnects at once when it went down (a
// driver that restarts is usable again as soon as it listens).
func (p *plugin) HandleConn(_ context.Context, s grpcstats.ConnStats) {
	var connected bool
	switch s.(type) {
	case *grpcstats.ConnBegin:
		connected = true
	case *grpcstats.ConnEnd:
		go p.conn.Connect()
	default:
		return
	}
	p.ps.mu.Lock()
	defer p.ps.mu.Unlock()
	p.connected = connected
	p.ps.sync(p.driver)
}

// prepare calls the plugin's NodePrepareResources in the service it chose.
func (p *plugin) prepare(ctx context.Context, req *drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if p.service == drapbv1beta1.DRAPluginService {
		return drapbv1beta1.V1Beta1ClientWrapper{DRAPluginClient: drapbv1beta1.NewDRAPluginClient(p.conn)}.NodePrepareResources(ctx, req)
	}
	return drapbv1.NewDRAPluginClient(p.conn).NodePrepareResources(ctx, req)
}

// unprepare calls the plugin's NodeUnprepareResources in the service it chose.
func (p *plugin) unprepare(ctx context.Context, req *drapbv1.NodeUnprepareResourcesRequest) (*drapbv1.NodeUnprepareResourcesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if p.service == drapbv1beta1.DRAPluginService {
		return drapbv1beta1.V1Beta1ClientWrapper{DRAPluginClient: drapbv1beta1.NewDRAPluginClient(p.conn)}.NodeUnprepareResources(ctx, req)
	}
	return drapbv1.NewDRAPluginClient(p.conn).NodeUnprepareResources(ctx, req)
}
