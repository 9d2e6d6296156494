package fake

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/utils/clock"
)

var (
	_ runtimeapi.RuntimeServiceServer = (*runtimeService)(nil)
	_ runtimeapi.ImageServiceServer   = (*imageService)(nil)
)

// Runtime is an in-memory CRI runtime. Create it with New, serve it with Start
// and script or inspect it with the other exported methods. All methods are
// safe for concurrent use.
//
// Runtime is the handle tests hold: serving (Start, Stop) and scripting and
// introspection. The CRI services it serves are types of their own over the
// same state: the runtime service is made of the runtime's facts (infoService),
// sandboxes, containers and stats, and the image service stands alone.
type Runtime struct {
	*state

	runtime *runtimeService
	images  *imageService

	server     *grpc.Server
	socketPath string
	stopOnce   sync.Once
}

// state is what the services share: the sandboxes, containers and images, the
// scripts, the recorded calls and injected errors, the event subscribers and
// the clock, under one lock.
type state struct {
	clock          clock.WithTicker
	runtimeName    string
	runtimeVersion string
	handlers       []string

	mu          sync.Mutex
	sandboxes   map[string]*sandbox
	containers  map[string]*container
	images      map[string]*image // by image id
	pullable    map[string]uint64 // normalised ref → size
	imageUsers  map[string]string // normalised ref → the image config's User
	pullAuths   map[string][]*runtimeapi.AuthConfig
	behaviours  map[string]Behaviour
	behaviourOf BehaviourFunc
	pullAny     bool
	execResults map[string]*runtimeapi.ExecSyncResponse
	runtimeCond condition
	networkCond condition
	podCIDR     string
	calls       []string
	exits       []string // container IDs in the order they exited
	errs        map[string]error
	onceErrs    map[string][]error
	subs        map[*subscriber]struct{}
	seq         uint64
	ipSeq       uint32

	// streaming: Start serves exec, attach and port-forward (WithStreaming); streamer once started.
	streaming bool
	streamer  streaming.Server

	done chan struct{} // closed by Stop
}

// runtimeService is the CRI RuntimeService: its parts each serve one group of
// RPCs over the shared state.
type runtimeService struct {
	*infoService
	*sandboxService
	*containerService
	*statsService
}

// infoService serves the runtime's own RPCs: Version, Status, the runtime
// config and the container event stream. It carries the Unimplemented base
// (one level below runtimeService's parts, so their methods take precedence).
type infoService struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	*state
}

// sandboxService serves the pod sandbox RPCs.
type sandboxService struct{ *state }

// containerService serves the container RPCs, exec and attach.
type containerService struct{ *state }

// statsService serves the stats and metrics RPCs.
type statsService struct{ *state }

// imageService is the CRI ImageService.
type imageService struct {
	runtimeapi.UnimplementedImageServiceServer
	*state
}

type condition struct {
	ready           bool
	reason, message string
}

// Option configures a Runtime.
type Option func(*state)

// WithClock sets the clock used for timestamps, ExitAfter and stop timeouts.
// The default is clock.RealClock{}.
func WithClock(c clock.WithTicker) Option {
	return func(r *state) { r.clock = c }
}

// WithVersion sets the runtime name and version reported by Version.
// The default is "fake-runtime", "0.1.0".
func WithVersion(runtimeName, runtimeVersion string) Option {
	return func(r *state) {
		r.runtimeName = runtimeName
		r.runtimeVersion = runtimeVersion
	}
}

// WithRuntimeHandlers sets the runtime handlers RunPodSandbox accepts (and
// Status reports) in addition to the default handler "". The default is
// "runc".
func WithRuntimeHandlers(names ...string) Option {
	return func(r *state) { r.handlers = append([]string{""}, names...) }
}

// BehaviourFunc scripts a container from its sandbox's and its own configuration (for example from the
// pod's annotations, which the sandbox carries); ok false falls back to SetBehaviour's script by name.
type BehaviourFunc func(sandbox *runtimeapi.PodSandboxConfig, container *runtimeapi.ContainerConfig) (b Behaviour, ok bool)

// WithBehaviourFunc scripts containers with f before the scripts by name.
func WithBehaviourFunc(f BehaviourFunc) Option {
	return func(r *state) { r.behaviourOf = f }
}

// WithPullAny makes PullImage of any reference succeed, as against a registry that has every image
// (SetPullable sizes still apply; other images are 1 MiB).
func WithPullAny() Option {
	return func(r *state) { r.pullAny = true }
}

// New returns a Runtime with empty state, both runtime conditions ready.
func New(opts ...Option) *Runtime {
	st := &state{
		clock:          clock.RealClock{},
		runtimeName:    "fake-runtime",
		runtimeVersion: "0.1.0",
		handlers:       []string{"", "runc"},
		sandboxes:      map[string]*sandbox{},
		containers:     map[string]*container{},
		images:         map[string]*image{},
		pullable:       map[string]uint64{},
		imageUsers:     map[string]string{},
		pullAuths:      map[string][]*runtimeapi.AuthConfig{},
		behaviours:     map[string]Behaviour{},
		execResults:    map[string]*runtimeapi.ExecSyncResponse{},
		runtimeCond:    condition{ready: true},
		networkCond:    condition{ready: true},
		errs:           map[string]error{},
		onceErrs:       map[string][]error{},
		subs:           map[*subscriber]struct{}{},
		done:           make(chan struct{}),
	}
	for _, o := range opts {
		o(st)
	}
	return &Runtime{
		state: st,
		runtime: &runtimeService{
			infoService:      &infoService{state: st},
			sandboxService:   &sandboxService{st},
			containerService: &containerService{st},
			statsService:     &statsService{st},
		},
		images: &imageService{state: st},
	}
}

// Start listens on the unix socket socketPath (removing a stale socket file),
// serves the runtime and image services in the background and returns the
// endpoint "unix://"+socketPath.
func (r *Runtime) Start(socketPath string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.server != nil {
		return "", errors.New("fake runtime: already started")
	}
	if r.isStopped() {
		return "", errors.New("fake runtime: already stopped")
	}
	if err := os.Remove(socketPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("remove stale socket %s: %w", socketPath, err)
	}
	lis, err := net.Listen("unix", socketPath)
	if err != nil {
		return "", fmt.Errorf("listen on %s: %w", socketPath, err)
	}
	if r.streaming {
		if err := r.startStreamingLocked(); err != nil {
			_ = lis.Close()
			return "", err
		}
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, r.runtime)
	runtimeapi.RegisterImageServiceServer(srv, r.images)
	r.server, r.socketPath = srv, socketPath
	go func() { _ = srv.Serve(lis) }()
	return "unix://" + socketPath, nil
}

// Endpoint is the endpoint Start returned ("" before Start).
func (r *Runtime) Endpoint() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.socketPath == "" {
		return ""
	}
	return "unix://" + r.socketPath
}

// Stop ends event streams and pending stop waits, stops the gRPC server and
// removes the socket. It is safe to call more than once.
func (r *Runtime) Stop() {
	r.stopOnce.Do(func() {
		r.mu.Lock()
		close(r.done)
		for _, c := range r.containers {
			c.cancelTimer()
		}
		srv, path, streamer := r.server, r.socketPath, r.streamer
		r.mu.Unlock()
		if streamer != nil {
			_ = streamer.Stop()
		}
		if srv == nil {
			return
		}
		srv.Stop()
		_ = os.Remove(path)
	})
}

func (r *state) isStopped() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// now returns the current time of the injected clock in UnixNano.
func (r *state) now() int64 {
	return r.clock.Now().UnixNano()
}

// nextSeq returns a sequence number used to keep listings in creation order.
func (r *state) nextSeq() uint64 {
	r.seq++
	return r.seq
}

// afterFunc runs f in its own goroutine once d has elapsed on the clock and
// returns a function cancelling it. f never runs on the clock's goroutine, so
// it may take r.mu even while the clock is being stepped.
func (r *state) afterFunc(d time.Duration, f func()) func() {
	if c, ok := r.clock.(clock.WithDelayedExecution); ok {
		t := c.AfterFunc(d, func() { go f() })
		return func() { t.Stop() }
	}
	t := r.clock.NewTimer(d)
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		select {
		case <-t.C():
			f()
		case <-stop:
		}
	}()
	return func() {
		once.Do(func() {
			t.Stop()
			close(stop)
		})
	}
}
