package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/certificate"
	"k8s.io/component-base/tracing"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/containergc"
	"github.com/nodelet/nodelet/devices"
	"github.com/nodelet/nodelet/dra"
	"github.com/nodelet/nodelet/eviction"
	"github.com/nodelet/nodelet/internal/periodic"
	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/nodeshutdown"
	"github.com/nodelet/nodelet/podcgroups"
	"github.com/nodelet/nodelet/probes"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/pleg"
	"github.com/nodelet/nodelet/runtime/podconfig"
	"github.com/nodelet/nodelet/staticpods"
	"github.com/nodelet/nodelet/volumes"
)

// Options are what New needs beyond the configuration. Only Config is required.
type Options struct {
	// Config is the node's complete configuration (config.Load or config.Default); it is validated.
	Config *config.Config
	// Version is nodelet's version, for the user agent and logs; KubeletVersion is what the Node reports
	// as status.nodeInfo.kubeletVersion (default DefaultKubeletVersion).
	Version, KubeletVersion string
	// RestConfig reaches the API server; nil builds it from Config.Kubeconfig, and with neither the node
	// runs standalone (static pods only).
	RestConfig *rest.Config
	// Logger is the node's logger (default: controller-runtime's global logger), named by node.
	Logger logr.Logger
	// Clock is the clock of every component's timers, periods, back-offs and timestamps (default: the
	// wall clock).
	Clock clock.WithTicker
	// Metrics registers and serves the node's metrics (default: controller-runtime's global registry).
	// Several nodes in one process need one registry each.
	Metrics ctrlmetrics.RegistererGatherer
	// TracerProvider, when set, takes the node's spans in place of the one the configuration's tracing
	// section makes (an embedder's own exporter, a test's recorder).
	TracerProvider trace.TracerProvider
	// Recorder records the node's events (default: the kubelet's recorder, writing to the API server).
	Recorder record.EventRecorder
	// Platform is what the node runs on (default Host(); Simulated for a node that touches no host).
	Platform Platform
	// Services, when set, is a Service lister shared with other nodes of the process (hollow nodes);
	// nil gives the node its own Service informer.
	Services ServiceLister
	// StaticPodUIDs computes static pod UIDs (nil: staticpods' own hash). The nodelet binary passes
	// kubeletuid.UIDs, the kubelet's, so that a node keeps its static pods across a handover; it is not
	// the default because it brings in k8s.io/kubernetes, whose replaces a library user would inherit.
	StaticPodUIDs staticpods.UIDFunc
	// ServingCertificates, with serverTLSBootstrap, builds the manager of the node API's serving certificate
	// (requested by a kubernetes.io/kubelet-serving CSR for the node's addresses, renewed before it
	// expires, served without a restart). The nodelet binary passes nodecreds.ServingCertificates, the
	// kubelet's; without it the node API keeps its self-signed certificate (or tlsCertFile).
	ServingCertificates ServingCertificatesFunc
}

// ServingCertificatesFunc builds a serving certificate manager from the node's API client and a function
// returning the node's current addresses (from its Node object).
type ServingCertificatesFunc func(kube kubernetes.Interface, addresses func() []corev1.NodeAddress) (certificate.Manager, error)

// DefaultKubeletVersion is the kubelet version nodelet reports to the API server.
const DefaultKubeletVersion = "v1.37.1+nodelet"

// ServiceLister is the cluster's Services, for the pods' service environment variables
// (podlifecycle.APIServices).
type ServiceLister interface {
	HasSynced() bool
	ListServices(ctx context.Context) ([]corev1.Service, error)
}

// Agent is one node, wired and ready to Run.
type Agent struct {
	cfg    *config.Config
	opts   Options
	log    logr.Logger
	mgr    ctrl.Manager
	cri    *runtime.Client
	ownCRI bool
	// api is how the node reaches the API server (remoteAPI), or that it does not (withoutAPI).
	api     apiAccess
	local   []manager.Runnable
	started atomic.Bool
	// eviction is the eviction manager (nil on a simulated node or without thresholds); evictionAdmit
	// hands its admission to the pod workers.
	eviction      *eviction.Manager
	evictionAdmit evictionAdmission
	// containerDeletor is the container garbage collector, told of container deaths by the PLEG (which is
	// made before it).
	containerDeletor atomic.Pointer[containergc.Collector]
	// podCgroups is the pod cgroup manager (nil when the runtime makes pod cgroups).
	podCgroups *podcgroups.Manager
	// volumeMgr sets up the pods' volumes (nil on a simulated node).
	volumeMgr *volumes.Manager
	// devices is the device manager (nil on a simulated node); nodeTrigger asks for a Node status
	// evaluation once the Node controller is built.
	devices     *devices.Manager
	nodeTrigger atomic.Pointer[func()]
	// claims is the DRA manager (nil on a simulated node).
	claims *dra.Manager
	// tracer takes the agent's spans (nil: not traced); tracerProvider is the one the agent made from its
	// configuration, shut down (its spans flushed) when the agent stops.
	tracer         trace.TracerProvider
	tracerProvider tracing.TracerProvider
	// shutdown is graceful node shutdown (nil on a simulated node).
	shutdown *nodeshutdown.Manager
	// loops counts what the periodic loops cost (nil on a simulated node).
	loops *loopCosts
	// podsTrigger asks for syncs of pods once the pod workers are built.
	podsTrigger atomic.Pointer[func([]types.UID)]
	// probeMetrics are the prober's metrics the node API serves at /metrics/probes (nil on a simulated node).
	probeMetrics *probes.Metrics
	// hostResources are the host's facts the containers' resources follow, read once (none when simulated).
	hostResources podconfig.HostResources
}

// registerRESTClientMetrics enables the API client's families beside rest_client_requests_total, as the
// kubelet serves them: request latency by verb and host, request and response sizes, client-side rate
// limiting, retries. client-go reports to one process-wide set, in controller-runtime's registry; enabling
// them again is a no-op.
func registerRESTClientMetrics() {
	ctrlmetrics.RegisterRESTClientMetrics(ctrlmetrics.MetricRequestLatency, ctrlmetrics.MetricRequestSize,
		ctrlmetrics.MetricResponseSize, ctrlmetrics.MetricRateLimiterLatency, ctrlmetrics.MetricRequestRetry)
}

// defaults fills the options left unset.
func (opts *Options) defaults() {
	if opts.KubeletVersion == "" {
		opts.KubeletVersion = DefaultKubeletVersion
	}
	if opts.Metrics == nil {
		opts.Metrics = ctrlmetrics.Registry
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = ctrl.Log
	}
	if opts.Platform == nil {
		opts.Platform = Host()
	}
}

// New validates opts and wires a node. Nothing runs until Run; ctx bounds what wiring starts early (the
// event broadcaster, informers' registration).
func New(ctx context.Context, opts Options) (*Agent, error) {
	cfg := opts.Config
	if cfg == nil {
		return nil, errors.New("agent: Options.Config is required")
	}
	if err := config.Validate(cfg); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	opts.defaults()
	registerRESTClientMetrics()
	a := &Agent{cfg: cfg, opts: opts, log: opts.Logger.WithValues("node", cfg.NodeName)}
	if err := os.MkdirAll(a.cfg.RootDir, 0o750); err != nil {
		return nil, fmt.Errorf("create root dir: %w", err)
	}
	if err := opts.Platform.prepare(a); err != nil {
		return nil, err
	}
	if !opts.Platform.simulated() {
		loops, err := newLoopCosts(opts.Metrics)
		if err != nil {
			return nil, err
		}
		a.loops = loops
	}
	restCfg := opts.RestConfig
	a.api = apiFor(restCfg, cfg)
	if restCfg == nil {
		rc, err := RestConfig(cfg, opts.Version)
		if err != nil {
			return nil, err
		}
		restCfg = rc
	}
	ropts := runtime.Options{
		ImageEndpoint: cfg.ImageEndpoint(),
		Timeout:       cfg.Kubelet.RuntimeRequestTimeout.Duration,
		Metrics:       runtime.NewMetrics(opts.Metrics),
	}
	if err := a.setUpTracing(); err != nil {
		return nil, err
	}
	if a.tracer != nil {
		ropts.TracerProvider = a.tracer
	}
	cri, err := runtime.Dial(cfg.RuntimeEndpoint(), ropts)
	if err != nil {
		return nil, err
	}
	a.cri, a.ownCRI = cri, true
	opts.Platform.adoptRuntime(ctx, a, cri)
	if a.mgr, err = a.newManager(restCfg); err != nil {
		_ = cri.Close()
		return nil, err
	}
	if err := a.setup(logr.NewContext(ctx, a.log), restCfg); err != nil {
		_ = cri.Close()
		return nil, err
	}
	return a, nil
}

// prepareHost puts the root directory on a shared mount (as the kubelet makes it), checks the cgroup version and swap, reads the host facts the
// containers' resources follow, and handles the kernel tunables as the kubelet: with protectKernelDefaults they
// must already hold the kubelet's values, without it they are set to them.
func (host) prepareHost(a *Agent) error {
	if err := volumes.MakeRShared(a.cfg.RootDir); err != nil {
		return fmt.Errorf("error configuring root directory: %w", err)
	}
	if err := checkCgroupVersion(&a.cfg.Kubelet, podcgroups.DefaultRoot); err != nil {
		return err
	}
	if err := checkSwap(a.log, &a.cfg.Kubelet, machine.Reader{}); err != nil {
		return err
	}
	host, err := readHostResources(&a.cfg.Kubelet, machine.Reader{}, podcgroups.DefaultRoot)
	if err != nil {
		return err
	}
	a.hostResources = host
	if a.cfg.Kubelet.ProtectKernelDefaults {
		if err := (machine.Reader{}).CheckKernelDefaults(); err != nil {
			return fmt.Errorf("protectKernelDefaults: %w", err)
		}
		return nil
	}
	changed, err := machine.Reader{}.SetKernelDefaults()
	if len(changed) > 0 {
		a.log.Info("Set kernel tunables to the kubelet's values (protectKernelDefaults is false)", "changed", changed)
	}
	if err != nil {
		return fmt.Errorf("kernel tunables (protectKernelDefaults false): %w", err)
	}
	return nil
}

// errCgroupV1 is the kubelet's refusal of a cgroup v1 host (failCgroupV1, true by default since v1.35).
var errCgroupV1 = errors.New("kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release")

// checkCgroupVersion refuses a cgroup v1 host unless failCgroupV1 is false, as the kubelet's configuration
// validation does.
func checkCgroupVersion(kc *kubeletconfigv1beta1.KubeletConfiguration, cgroupRoot string) error {
	if kc.FailCgroupV1 != nil && !*kc.FailCgroupV1 {
		return nil
	}
	unified, err := podcgroups.IsUnified(cgroupRoot)
	if err != nil {
		return fmt.Errorf("failCgroupV1: %w", err)
	}
	if !unified {
		return errCgroupV1
	}
	return nil
}

// Run runs the node until ctx ends or a component fails, and returns that component's error. Node-local
// components (runtime connection, PLEG, static pods, the pod reconciler, the node server) run beside the
// manager: a manager starts its runnables only once the API's caches have synced, and static pods must
// run before — and without — an API server. Run may be called once.
func (a *Agent) Run(ctx context.Context) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("agent: Run called twice")
	}
	if a.ownCRI {
		defer func() { _ = a.cri.Close() }()
	}
	if a.tracerProvider != nil {
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = a.tracerProvider.Shutdown(sctx) // the spans still buffered are sent
		}()
	}
	ctx = logr.NewContext(ctx, a.log)
	if a.loops != nil {
		ctx = periodic.WithObserver(ctx, a.loops)
	}
	a.log.Info("Starting nodelet", "version", a.opts.Version, "config", a.cfg.ConfigFile, "standalone", a.api.standalone(),
		"simulated", a.opts.Platform.simulated())
	g, gctx := errgroup.WithContext(ctx)
	for _, r := range a.local {
		g.Go(func() error { return stopped(ctx, r.Start(gctx)) })
	}
	g.Go(func() error { return stopped(ctx, a.mgr.Start(gctx)) })
	return g.Wait()
}

// stopped drops the error a component returns because the agent is stopping.
func stopped(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// Runtime is the node's CRI client.
func (a *Agent) Runtime() *runtime.Client { return a.cri }

// Manager is the node's controller-runtime manager (its client reads through the node's caches).
func (a *Agent) Manager() ctrl.Manager { return a.mgr }

// NodeName is the node's name.
func (a *Agent) NodeName() string { return a.cfg.NodeName }

// clock is the clock every component uses: Options.Clock, else the wall clock.
func (a *Agent) clock() clock.WithTicker {
	if a.opts.Clock != nil {
		return a.opts.Clock
	}
	return clock.RealClock{}
}

// addChecks adds the health and readiness checks: ping, the runtime and the PLEG.
func (a *Agent) addChecks(podEvents *pleg.PLEG) error {
	if err := a.mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := a.mgr.AddReadyzCheck("runtime", a.cri.ReadyCheck); err != nil {
		return err
	}
	return a.mgr.AddReadyzCheck("pleg", func(*http.Request) error { return podEvents.Healthy() })
}

// nodeIPs are --node-ip's addresses, or the one the hostname resolves to (else the default route's).
func (a *Agent) nodeIPs() ([]net.IP, error) {
	if len(a.cfg.NodeIPs) > 0 {
		return a.cfg.NodeIPs, nil
	}
	return detectNodeIP(a.cfg.Hostname)
}

func secondsDuration(s int32) time.Duration { return time.Duration(s) * time.Second }

func derefInt32(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func derefInt64(p *int64, def int64) int64 {
	if p == nil {
		return def
	}
	return *p
}

func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
