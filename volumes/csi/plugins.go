package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"k8s.io/client-go/util/workqueue"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/clock"
)

// The kubelet's plugin registration timings: connecting to a plugin's registration socket, its GetInfo
// call, its NotifyRegistrationStatus call, and the back-off of a registration that failed (from half a
// second, doubling, to two minutes).
const (
	dialTimeout   = 10 * time.Second
	infoTimeout   = time.Second
	notifyTimeout = 5 * time.Second
	retryBase     = 500 * time.Millisecond
	retryMax      = 2*time.Minute + 2*time.Second
	// registerWorkers bounds the registrations running at once (one plugin's slow NodeGetInfo does not
	// hold up another's).
	registerWorkers = 4
)

// Handler registers the plugins of one type (registerapi.CSIPlugin, DevicePlugin, DRAPlugin), as the
// kubelet's PluginHandler.
type Handler interface {
	// ValidatePlugin says whether the plugin may register: an error refuses it.
	ValidatePlugin(ctx context.Context, name, endpoint string, versions []string) error
	// RegisterPlugin registers the validated plugin; an error refuses it.
	RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error
	// DeRegisterPlugin forgets the plugin registered at endpoint: its socket is gone or replaced.
	DeRegisterPlugin(ctx context.Context, name, endpoint string)
}

// PluginWatcher registers the plugins that put a registration socket (the kubelet's pluginregistration
// v1 API) under Dir, through the Handler of their type, as the kubelet's plugin manager: for each socket
// it asks GetInfo, validates and registers the plugin with its handler, then tells the plugin the outcome
// with NotifyRegistrationStatus. A plugin of a type no handler takes is refused. A registration that
// fails is tried again with a back-off for as long as the socket is there. A socket removed de-registers
// its plugin; a socket created again at the same path re-registers it (the old registration first).
type PluginWatcher struct {
	// Dir is watched: <root-dir>/plugins_registry. It is made if missing.
	Dir string
	// Handlers take the plugins by type.
	Handlers map[string]Handler
	// Clock times the retries (nil: the real clock).
	Clock clock.WithTicker

	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[string]
	gen     uint64
	desired map[string]uint64  // socket path → generation of the socket there
	inodes  map[string]uint64  // socket path → inode of the socket there
	actual  map[string]*plugin // socket path → the plugin registered from it
}

// plugin is one registration, from the socket of a generation.
type plugin struct {
	gen      uint64
	name     string
	endpoint string
	handler  Handler
}

// Start watches Dir and registers plugins until ctx ends. It returns an error only if Dir cannot be
// made or watched.
func (w *PluginWatcher) Start(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx).WithName("pluginwatcher")
	ctx = logr.NewContext(ctx, log)
	if err := os.MkdirAll(w.Dir, 0o750); err != nil {
		return fmt.Errorf("make the plugin registration directory: %w", err)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch the plugin registration directory: %w", err)
	}
	defer func() { _ = fw.Close() }()
	w.init()
	if err := w.scan(ctx, fw, w.Dir); err != nil {
		return err
	}
	log.Info("Watching for plugin sockets", "path", w.Dir)
	var wg sync.WaitGroup
	for range registerWorkers {
		wg.Go(func() { w.work(ctx) })
	}
	w.watch(ctx, fw)
	w.queue.ShutDown()
	wg.Wait()
	return nil
}

func (w *PluginWatcher) init() {
	clk := w.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.desired, w.inodes, w.actual = map[string]uint64{}, map[string]uint64{}, map[string]*plugin{}
	w.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, retryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: clk})
}

// socketCreated records a (new) socket at path, inode ino: registered again even if a plugin was registered
// from the path before. The socket already recorded there, seen again (by the start-up scan and its own
// Create event), is not a new one: its registration stays.
func (w *PluginWatcher) socketCreated(path string, ino uint64) {
	w.mu.Lock()
	if _, ok := w.desired[path]; ok && ino != 0 && w.inodes[path] == ino {
		w.mu.Unlock()
		return
	}
	w.gen++
	w.desired[path], w.inodes[path] = w.gen, ino
	w.mu.Unlock()
	w.queue.Add(path)
}

// gone records that path is no more: the socket there, or every socket under the directory there.
func (w *PluginWatcher) gone(path string) {
	var paths []string
	w.mu.Lock()
	for p := range w.desired {
		if p == path || strings.HasPrefix(p, path+string(os.PathSeparator)) {
			delete(w.desired, p)
			delete(w.inodes, p)
			paths = append(paths, p)
		}
	}
	w.mu.Unlock()
	for _, p := range paths {
		w.queue.Add(p)
	}
}

func (w *PluginWatcher) work(ctx context.Context) {
	for {
		path, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		switch err := w.reconcile(ctx, path); {
		case err == nil:
			w.queue.Forget(path)
		case ctx.Err() == nil:
			logr.FromContextOrDiscard(ctx).Error(err, "Registering a plugin failed; retrying", "socket", path)
			w.queue.AddRateLimited(path)
		}
		w.queue.Done(path)
	}
}

// reconcile brings the socket at path to what the directory says: the plugin registered from the socket
// there now, or none.
func (w *PluginWatcher) reconcile(ctx context.Context, path string) error {
	w.mu.Lock()
	gen, want := w.desired[path]
	have := w.actual[path]
	w.mu.Unlock()
	if have != nil && (!want || have.gen != gen) {
		w.unregister(ctx, path, have)
		have = nil
	}
	if !want || have != nil {
		return nil
	}
	return w.register(ctx, path, gen)
}

func (w *PluginWatcher) unregister(ctx context.Context, path string, p *plugin) {
	w.mu.Lock()
	delete(w.actual, path)
	w.mu.Unlock()
	p.handler.DeRegisterPlugin(ctx, p.name, p.endpoint)
	logr.FromContextOrDiscard(ctx).Info("Plugin de-registered", "plugin", p.name, "endpoint", p.endpoint, "socket", path)
}

// register registers the plugin at path as the kubelet does: GetInfo, its type's handler, validation,
// registration, then the outcome told to the plugin (a refusal with the kubelet's message).
func (w *PluginWatcher) register(ctx context.Context, path string, gen uint64) error {
	conn, err := dialRegistration(ctx, path)
	if err != nil {
		return fmt.Errorf("RegisterPlugin error -- dial failed at socket %s, err: %w", path, err)
	}
	defer func() { _ = conn.Close() }()
	rc := registerapi.NewRegistrationClient(conn)
	infoCtx, cancel := context.WithTimeout(ctx, infoTimeout)
	info, err := rc.GetInfo(infoCtx, &registerapi.InfoRequest{})
	cancel()
	if err != nil {
		return fmt.Errorf("RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket %s, err: %w", path, err)
	}
	p, refusal := w.admit(ctx, path, gen, info)
	if refusal != "" {
		return notify(ctx, rc, false, refusal)
	}
	if err := notify(ctx, rc, true, ""); err != nil {
		p.handler.DeRegisterPlugin(ctx, p.name, p.endpoint)
		return fmt.Errorf("RegisterPlugin error -- failed to send registration status at socket %s, err: %w", path, err)
	}
	w.mu.Lock()
	w.actual[path] = p
	w.mu.Unlock()
	logr.FromContextOrDiscard(ctx).Info("Plugin registered", "plugin", p.name, "pluginType", info.Type,
		"endpoint", p.endpoint, "versions", info.SupportedVersions, "socket", path)
	return nil
}

// admit validates and registers the plugin with its type's handler; a refusal is the message to tell it.
func (w *PluginWatcher) admit(ctx context.Context, path string, gen uint64, info *registerapi.PluginInfo) (*plugin, string) {
	h, ok := w.Handlers[info.Type]
	if !ok {
		return nil, fmt.Sprintf("RegisterPlugin error -- no handler registered for plugin type: %s at socket %s", info.Type, path)
	}
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = path
	}
	if err := h.ValidatePlugin(ctx, info.Name, endpoint, info.SupportedVersions); err != nil {
		return nil, fmt.Sprintf("RegisterPlugin error -- plugin validation failed with err: %v", err)
	}
	if err := h.RegisterPlugin(ctx, info.Name, endpoint, info.SupportedVersions); err != nil {
		return nil, fmt.Sprintf("RegisterPlugin error -- plugin registration failed with err: %v", err)
	}
	return &plugin{gen: gen, name: info.Name, endpoint: endpoint, handler: h}, ""
}

// notify tells the plugin whether it is registered. A refusal is returned as an error (so it is retried
// and logged), whether the plugin heard it or not.
func notify(ctx context.Context, rc registerapi.RegistrationClient, registered bool, refusal string) error {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	_, err := rc.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: registered, Error: refusal})
	switch {
	case err != nil && refusal != "":
		return fmt.Errorf("%s (and telling the plugin failed: %w)", refusal, err)
	case err != nil:
		return err
	case refusal != "":
		return errors.New(refusal)
	}
	return nil
}

// dialRegistration connects to the registration socket at path, waiting for the connection up to
// dialTimeout. A socket appears before its server listens: connecting is tried again soon.
func dialRegistration(ctx context.Context, path string) (*grpc.ClientConn, error) {
	conn, err := dialUnix(path, grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	}))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			_ = conn.Close()
			return nil, fmt.Errorf("connect to %s: %w", path, ctx.Err())
		}
	}
	return conn, nil
}
