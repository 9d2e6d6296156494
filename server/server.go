package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	goruntime "runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"k8s.io/apimachinery/pkg/types"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/runtime/podconfig"
)

// Runtime is what the server asks of the CRI runtime; nodelet's runtime.Client satisfies it.
type Runtime interface {
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (string, error)
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (string, error)
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (string, error)
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error)
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
	ReopenContainerLog(ctx context.Context, id string) error
}

// Pods lists the pods this node runs: for /pods, and to find a pod's UID and containers by namespace/name.
type Pods interface {
	List(ctx context.Context) ([]corev1.Pod, error)
}

// PodsFunc adapts a function to Pods.
type PodsFunc func(ctx context.Context) ([]corev1.Pod, error)

// List implements Pods.
func (f PodsFunc) List(ctx context.Context) ([]corev1.Pod, error) { return f(ctx) }

// Options configure a Server. Auth and Authz are the KubeletConfiguration's sections, defaulted.
type Options struct {
	Address string // listen address, e.g. 0.0.0.0
	Port    int32  // listen port, e.g. 10250

	// TLSCertFile and TLSPrivateKeyFile are the serving certificate; when empty, a self-signed certificate
	// for NodeName is generated once and kept in CertDir (kubelet.crt, kubelet.key), as the kubelet does.
	TLSCertFile, TLSPrivateKeyFile string
	CertDir                        string
	// ServingCertificate, when set, gives the certificate of each TLS handshake (serverTLSBootstrap: a
	// certificate manager's current one, so a renewed certificate is served without a restart); the files
	// above are then not used. A nil certificate fails the handshake, as in the kubelet.
	ServingCertificate func() *tls.Certificate

	NodeName string
	Auth     kubeletconfigv1beta1.KubeletAuthentication
	Authz    kubeletconfigv1beta1.KubeletAuthorization
	// Kube creates TokenReviews and SubjectAccessReviews (required by webhook authentication/authorization).
	Kube kubernetes.Interface

	Runtime Runtime
	Pods    Pods

	Metrics prometheus.Gatherer // served at /metrics; nil serves an empty registry
	// Registerer, when set, takes the server's own metrics (its requests, WebSocket streams).
	Registerer prometheus.Registerer
	// Timelines answers a pod's start timeline by namespace and name (served at /timeline/{ns}/{pod}; nil:
	// none).
	Timelines func(namespace, name string) (any, bool)
	Configz   any // served at /configz as {"kubeletconfig": Configz}
	// ProbeMetrics are the prober's metrics (probes.Metrics), served at /metrics/probes in a registry of
	// their own with process_start_time_seconds, as the kubelet; nil serves the start time alone.
	ProbeMetrics prometheus.Collector

	PodLogsDir           string // where container logs live (/var/log/pods)
	ContainerLogMaxSize  string // a quantity ("10Mi"); "" or a non-positive size disables rotation
	ContainerLogMaxFiles int32  // files kept per container, current one included (at least 2)

	Clock     clock.WithTicker
	NodeStats func(ctx context.Context) (NodeStats, error) // node figures for /stats/summary; nil: none
	// PodProcesses counts a pod's processes for its process_stats (the pod's pids cgroup); nil: none.
	PodProcesses func(uid types.UID) (uint64, bool)
	// PodVolumeStats is the usage of a pod's volumes on the node's disk (the summary's volume stats); nil: none.
	PodVolumeStats func(uid types.UID) []statsapi.VolumeStats
	// Cgroups reads the node's cgroups for /metrics/cadvisor: the root and the KubepodsCgroup tree (its path in
	// the cgroup driver's layout). nil: the containers' CPU and memory come from the runtime's stats.
	Cgroups        CgroupReader
	KubepodsCgroup string
	// Machine is the machine's facts for /metrics/cadvisor's machine_* families; nil: none.
	Machine func() (MachineFacts, error)

	// DisableServer is enableServer: false: no node API on Port at all (container logs are still
	// rotated, and the read-only port is served if set), as the kubelet.
	DisableServer bool
	// DisableDebuggingHandlers is enableDebuggingHandlers: false: exec, attach, port-forward, run,
	// containerLogs, runningpods, pprof and logs answer 405 "Debug endpoints are disabled." (after
	// authentication and authorization) and /configz, /flagz and /statusz are not served, as the kubelet.
	DisableDebuggingHandlers bool
	// DisableSystemLogHandler is enableSystemLogHandler: false: with debugging handlers, /logs/ answers 405
	// "logs endpoint is disabled." instead of serving NodeLogDir (default /var/log/). SystemLogQuery is
	// enableSystemLogQuery: /logs/ answers node log queries (?query=<service>|<file>, journal options),
	// through JournalCommand (default journalctl) for services in the journal.
	DisableSystemLogHandler bool
	SystemLogQuery          bool
	NodeLogDir              string
	JournalCommand          string
	// DisableProfilingHandler is enableProfilingHandler: false: with debugging handlers, /debug/pprof/
	// answers 405 "profiling endpoint is disabled." instead of the profiles, as the kubelet.
	DisableProfilingHandler bool
	// ContentionProfiling is enableContentionProfiling: with debugging and profiling handlers on, Start
	// sets the process's block profile rate to 1 (every blocking event), as the kubelet.
	ContentionProfiling bool
	// Flagz is the command line /flagz serves (the ComponentFlagz gate, on by default); nil serves no
	// /flagz, as the kubelet without a flag set. DisableStatusz is the ComponentStatusz gate off: no
	// /statusz. Both are served only with debugging handlers, as in the kubelet.
	Flagz          FlagReader
	DisableStatusz bool
	// KubeletVersion is the binary version /statusz reports (v1.37.1+nodelet); "" or a version that does
	// not parse reports the build's, as the kubelet.
	KubeletVersion string
	// TLSMinVersion, TLSCipherSuites and TLSCurvePreferences are tlsMinVersion, tlsCipherSuites and
	// tlsCurvePreferences, parsed (config.ParseTLS). A zero TLSMinVersion means TLS 1.2, the kubelet's
	// default; nil suites and curves mean Go's.
	TLSMinVersion       uint16
	TLSCipherSuites     []uint16
	TLSCurvePreferences []tls.CurveID
	// ReadOnlyPort is readOnlyPort: when not 0, the kubelet's unauthenticated endpoints (healthz, pods,
	// stats, metrics) are served over plain HTTP on Address:ReadOnlyPort, as the kubelet.
	ReadOnlyPort int32
}

// Limits of the server. Bodies are tiny on every kubelet endpoint; streams (exec, attach, port-forward,
// followed logs) run up to the kubelet's 4 h, other requests get requestTimeout.
const (
	maxHeaderBytes    = 1 << 20
	maxBodyBytes      = 1 << 20
	readHeaderTimeout = 30 * time.Second
	idleTimeout       = 90 * time.Second
	streamTimeout     = 4 * time.Hour
	requestTimeout    = 2 * time.Minute
	rotationPeriod    = 10 * time.Second
	followPollPeriod  = time.Second
	shutdownTimeout   = 5 * time.Second
)

// Server is the node API server. Create it with New and run it with Start.
type Server struct {
	opts      Options
	authn     authenticator.Request
	authz     authorizer
	clientCA  *dynamiccertificates.DynamicFileCAContent
	tlsConfig *tls.Config
	handler   http.Handler
	rotation  rotationPolicy
	// logPaths are the log paths of the running containers log rotation saw, by container ID (a
	// container's log path never changes); only its goroutine uses it.
	logPaths map[string]string
	cpu      *cpuRates
	// rotating is held (write) while a log file is renamed and reopened, so a follower that sees a new file
	// first drains the old one completely.
	rotating sync.RWMutex
	// backoff retries TokenReview and SubjectAccessReview calls that failed.
	backoff wait.Backoff
	// readOnlyHandler serves the read-only port (nil without one).
	readOnlyHandler http.Handler
	// probeMetrics is /metrics/probes' registry.
	probeMetrics *prometheus.Registry
	// http are the request metrics.
	http *httpMetrics
	// listen opens the listeners (net.Listen; tests replace it).
	listen func(network, address string) (net.Listener, error)
	// setBlockProfileRate is runtime.SetBlockProfileRate (tests replace it).
	setBlockProfileRate func(rate int)
	// listening receives the address Start listens on (for tests); readOnlyListening the read-only one.
	listening, readOnlyListening chan net.Addr
}

// New validates the options and builds the server: serving certificate, authenticator, authorizer, routes.
// With DisableServer it needs no certificate or authentication: it only rotates logs and serves the
// read-only port, if any.
func New(o Options) (*Server, error) {
	if err := validate(&o); err != nil {
		return nil, err
	}
	s := &Server{opts: o, cpu: newCPURates(), backoff: reviewBackoff(), listen: net.Listen, logPaths: map[string]string{},
		setBlockProfileRate: goruntime.SetBlockProfileRate,
		listening:           make(chan net.Addr, 1), readOnlyListening: make(chan net.Addr, 1)}
	var err error
	if s.rotation, err = parseRotationPolicy(o.ContainerLogMaxSize, o.ContainerLogMaxFiles); err != nil {
		return nil, err
	}
	s.http = newHTTPMetrics(o.Clock)
	if o.Registerer != nil {
		if err := s.http.register(o.Registerer); err != nil {
			return nil, fmt.Errorf("node server metrics: %w", err)
		}
		if err := o.Registerer.Register(logMetrics{s}); err != nil {
			return nil, fmt.Errorf("node server metrics: %w", err)
		}
	}
	if s.probeMetrics, err = probeMetricsRegistry(o.ProbeMetrics, o.Clock); err != nil {
		return nil, err
	}
	if o.ReadOnlyPort != 0 {
		s.readOnlyHandler = s.http.instrument("readonly", s.withLimits(s.readOnlyRoutes()))
	}
	if o.DisableServer {
		return s, nil
	}
	if err := s.buildAuth(); err != nil {
		return nil, err
	}
	if s.tlsConfig, err = s.buildTLS(); err != nil {
		return nil, err
	}
	s.handler = s.http.instrument("readwrite", s.withLimits(s.withAuth(s.routes())))
	return s, nil
}

// validate checks the required options and fills the defaults.
func validate(o *Options) error {
	if o.NodeName == "" {
		return errors.New("node server: node name is required")
	}
	if o.Runtime == nil || o.Pods == nil {
		return errors.New("node server: runtime and pods are required")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.PodLogsDir == "" {
		o.PodLogsDir = podconfig.DefaultPodLogsDir
	}
	if o.Metrics == nil {
		o.Metrics = prometheus.NewRegistry()
	}
	return nil
}

// Start serves the node API over HTTPS (unless disabled) and the read-only port over HTTP (if set) until
// ctx ends, and rotates container logs every 10 s. It is a manager Runnable.
func (s *Server) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("node-server")
	ctx = ctrl.LoggerInto(ctx, log)
	if s.clientCA != nil {
		go s.clientCA.Run(ctx, 1)
	}
	if s.profilesContention() {
		s.setBlockProfileRate(1)
	}
	go s.rot().rotateLogs(ctx)
	var serving []<-chan error
	if s.handler != nil {
		logCipherSuites(ctx, s.opts.TLSMinVersion, s.opts.TLSCipherSuites)
		ch, err := s.serve(ctx, s.opts.Port, s.handler, s.tlsConfig, s.listening)
		if err != nil {
			return err
		}
		serving = append(serving, ch)
	}
	if s.readOnlyHandler != nil {
		ch, err := s.serve(ctx, s.opts.ReadOnlyPort, s.readOnlyHandler, nil, s.readOnlyListening)
		if err != nil {
			return err
		}
		serving = append(serving, ch)
	}
	var first error
	for _, ch := range serving {
		if err := <-ch; err != nil && first == nil {
			first = err
		}
	}
	if len(serving) == 0 {
		<-ctx.Done()
	}
	return first
}

// profilesContention tells whether the node API profiles contention: enableContentionProfiling with the
// server, its debugging handlers and its profiling handler on, as the kubelet.
func (s *Server) profilesContention() bool {
	o := &s.opts
	return s.handler != nil && o.ContentionProfiling && !o.DisableDebuggingHandlers && !o.DisableProfilingHandler
}

// serve listens on Address:port and serves handler (over TLS when tlsConfig is set) until ctx ends; the
// channel receives the server's end (nil after a shutdown).
func (s *Server) serve(ctx context.Context, port int32, handler http.Handler, tlsConfig *tls.Config, listening chan net.Addr) (<-chan error, error) {
	addr := net.JoinHostPort(s.opts.Address, strconv.Itoa(int(port)))
	ln, err := s.listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("node server: listen on %s: %w", addr, err)
	}
	srv := s.httpServer(ctx, handler, tlsConfig)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if tlsConfig != nil {
		ctrl.LoggerFrom(ctx).Info("Serving the node API", "address", ln.Addr().String())
	} else {
		ctrl.LoggerFrom(ctx).Info("Serving the read-only node API", "address", ln.Addr().String())
	}
	select {
	case listening <- ln.Addr():
	default:
	}
	done := make(chan error, 1)
	go func() {
		var serr error
		if tlsConfig != nil {
			serr = srv.ServeTLS(ln, "", "")
		} else {
			serr = srv.Serve(ln)
		}
		if serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			done <- fmt.Errorf("node server: %w", serr)
			return
		}
		done <- nil
	}()
	return done, nil
}

// logCipherSuites notes, as the kubelet does, each configured cipher suite Go calls insecure, and suites
// configured with a TLS 1.3 minimum (TLS 1.3 suites are not configurable).
func logCipherSuites(ctx context.Context, minVersion uint16, suites []uint16) {
	for _, c := range tls.InsecureCipherSuites() {
		if slices.Contains(suites, c.ID) {
			ctrl.LoggerFrom(ctx).Info("Use of insecure cipher detected.", "cipher", c.Name)
		}
	}
	if minVersion == tls.VersionTLS13 && len(suites) > 0 {
		ctrl.LoggerFrom(ctx).Info("Warning: TLS 1.3 cipher suites are not configurable, ignoring --tls-cipher-suites")
	}
}

// httpServer is the kubelet's server: long read/write timeouts for streams, bounded headers.
func (s *Server) httpServer(ctx context.Context, handler http.Handler, tlsConfig *tls.Config) *http.Server {
	return &http.Server{
		Handler:           handler,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       streamTimeout,
		WriteTimeout:      streamTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// HTTP/1.1 only: streams are upgraded connections, which HTTP/2 cannot hijack.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
}

// NeedLeaderElection is false: every node serves its own API.
func (s *Server) NeedLeaderElection() bool { return false }
