// Command nodelet is a Kubernetes node agent: it does the kubelet's job as a controller-runtime operator
// that runs once per node. main only wires: configuration, logging, the manager and its controllers.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/controllers"
	"github.com/nodelet/nodelet/imagepull"
	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/podcgroups"
	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/probes"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/server"
	"github.com/nodelet/nodelet/staticpods"
	"github.com/nodelet/nodelet/volumes"
)

// Set at build time (-ldflags -X main.version=...).
var (
	version     = "dev"
	kubeVersion = "v1.37.1"
)

func main() {
	cfg, err := config.Load(os.Args[1:])
	if errors.Is(err, pflag.ErrHelp) {
		os.Exit(0)
	}
	if errors.Is(err, config.ErrVersion) {
		fmt.Println("Kubernetes", kubeVersion+"+nodelet")
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodelet: invalid configuration:", err)
		os.Exit(1)
	}
	log := newLogger(cfg.Verbosity)
	cfg.LogNotices(log)
	if err := run(ctrl.SetupSignalHandler(), cfg, log); err != nil {
		log.Error(err, "nodelet failed")
		os.Exit(1)
	}
}

// newLogger returns a JSON zap logger at the kubelet's -v level, and routes controller-runtime and
// client-go (klog) logs through it.
func newLogger(verbosity int) logr.Logger {
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(zapcore.Level(-verbosity))
	zc.Sampling = nil
	zc.EncoderConfig.TimeKey = "ts"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	z, err := zc.Build()
	if err != nil {
		panic(err) // only on an invalid static configuration
	}
	log := zapr.NewLogger(z)
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	return log
}

func run(ctx context.Context, cfg *config.Config, log logr.Logger) error {
	if err := os.MkdirAll(cfg.RootDir, 0o750); err != nil {
		return fmt.Errorf("create root dir: %w", err)
	}
	if cfg.Kubelet.ProtectKernelDefaults {
		if err := (machine.Reader{}).CheckKernelDefaults(); err != nil {
			return fmt.Errorf("protectKernelDefaults: %w", err)
		}
	}
	standalone := cfg.Kubeconfig == ""
	log.Info("Starting nodelet", "version", version, "node", cfg.NodeName, "config", cfg.ConfigFile, "standalone", standalone)
	restCfg, err := restConfig(cfg)
	if err != nil {
		return err
	}
	cri, err := runtime.Dial(cfg.RuntimeEndpoint(), runtime.Options{
		ImageEndpoint: cfg.ImageEndpoint(),
		Timeout:       cfg.Kubelet.RuntimeRequestTimeout.Duration,
		Metrics:       runtime.NewMetrics(ctrlmetrics.Registry),
	})
	if err != nil {
		return err
	}
	defer func() { _ = cri.Close() }()
	mgr, err := newManager(restCfg, cfg)
	if err != nil {
		return err
	}
	a := &agent{cfg: cfg, mgr: mgr, cri: cri, standalone: standalone}
	if err := a.setup(ctx, restCfg); err != nil {
		return err
	}
	// Node-local work (runtime, PLEG, static pods, the pod controller) runs beside the manager: a
	// manager starts its runnables only once the API's caches have synced, and static pods must run
	// before — and without — an API server.
	for _, r := range a.local {
		go func() {
			if err := r.Start(ctx); err != nil {
				log.Error(err, "Node-local component stopped")
			}
		}()
	}
	return mgr.Start(ctx)
}

// agent holds what main wires together.
type agent struct {
	cfg        *config.Config
	mgr        ctrl.Manager
	cri        *runtime.Client
	standalone bool
	local      []manager.Runnable
}

func (a *agent) setup(ctx context.Context, restCfg *rest.Config) error {
	cfg, mgr, cri := a.cfg, a.mgr, a.cri
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("runtime", cri.ReadyCheck); err != nil {
		return err
	}
	connector := &runtime.Connector{Client: cri, Clock: clock.RealClock{}}
	a.local = append(a.local, connector)
	recorder, err := eventRecorder(ctx, restCfg, cfg.NodeName, a.standalone)
	if err != nil {
		return err
	}
	ips, err := nodeIPs(cfg)
	if err != nil {
		return err
	}
	pleg := runtime.NewPLEG(cri, runtime.PLEGOptions{
		Period: time.Second, Clock: clock.RealClock{}, Metrics: ctrlmetrics.Registry, UseEvents: true,
	})
	a.local = append(a.local, pleg)
	if err := mgr.AddReadyzCheck("pleg", func(*http.Request) error { return pleg.Healthy() }); err != nil {
		return err
	}
	store := a.staticPods(recorder)
	pods := podReconciler(mgr, cfg, cri, pleg, recorder, ips, a.standalone)
	if !a.standalone {
		if pods.Services, err = controllers.NewAPIServices(ctx, mgr.GetCache()); err != nil {
			return err
		}
	}
	pods.Probes = &probes.Manager{Exec: cri, Clock: clock.RealClock{}, Recorder: recorder, OnChange: pods.Enqueue}
	pods.Volumes = a.volumes(pods)
	if pods.Sysctls, err = sysctlAllowlist(ctx, cfg); err != nil {
		return err
	}
	if err := a.hardening(pods, connector); err != nil {
		return err
	}
	if store != nil {
		pods.Static, pods.StaticKinds = store, a.staticKinds()
	}
	var sources []source.Source
	if !a.standalone {
		sources = append(sources, controllers.APIPodSource(mgr.GetCache()))
	}
	a.local = append(a.local, manager.RunnableFunc(func(ctx context.Context) error { return pods.Run(ctx, sources...) }))
	srv, err := a.nodeServer(restCfg, store)
	if err != nil {
		return err
	}
	a.local = append(a.local, srv)
	if a.standalone {
		return nil
	}
	return a.setupAPI(ctx, recorder, ips, pleg, store)
}

// setupAPI wires what needs the API server: the pod index, the Node, its Lease and mirror pods.
func (a *agent) setupAPI(ctx context.Context, recorder record.EventRecorder, ips []net.IP, pleg *runtime.PLEG, store *staticpods.Store) error {
	cfg, mgr := a.cfg, a.mgr
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, controllers.PodNodeNameField, controllers.PodNodeName); err != nil {
		return fmt.Errorf("index pods by node: %w", err)
	}
	node, err := nodeReconciler(mgr, cfg, a.cri, recorder, ips)
	if err != nil {
		return err
	}
	node.HealthChecks = []controllers.HealthCheck{{Name: "PLEG", Check: pleg.Healthy}}
	if err := node.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up node controller: %w", err)
	}
	lease := &controllers.LeaseController{
		Client: mgr.GetClient(), Reader: mgr.GetClient(), Clock: clock.RealClock{}, NodeName: cfg.NodeName,
		LeaseDuration: secondsDuration(cfg.Kubelet.NodeLeaseDurationSeconds),
	}
	if err := lease.SetupWithManager(mgr); err != nil {
		return err
	}
	if store == nil {
		return nil
	}
	mirrors := &controllers.MirrorPodReconciler{Client: mgr.GetClient(), Static: store, StaticKinds: a.staticKinds(), NodeName: cfg.NodeName,
		NodeUID: func(ctx context.Context) types.UID {
			n := &corev1.Node{}
			if err := mgr.GetClient().Get(ctx, client.ObjectKey{Name: cfg.NodeName}, n); err != nil {
				return ""
			}
			return n.UID
		}}
	return mirrors.SetupWithManager(mgr)
}

// volumes is the volume manager: Secrets and ConfigMaps are read by name straight from the API (kept 10 s),
// service account tokens come from the TokenRequest API — all that the Node authorizer allows a node.
func (a *agent) volumes(pods *controllers.PodReconciler) *volumes.Manager {
	m := &volumes.Manager{RootDir: a.cfg.RootDir, Clock: clock.RealClock{}, NodeName: a.cfg.NodeName, Objects: noAPI{}}
	if !a.standalone {
		m.Objects = &volumes.CachedObjects{Reader: a.mgr.GetAPIReader(), Tokens: a.mgr.GetClient(),
			Clock: clock.RealClock{}, TTL: 10 * time.Second}
	}
	if pods.Node != nil {
		m.NodeAllocatable = func() corev1.ResourceList {
			n, err := pods.Node(context.Background())
			if err != nil {
				return nil
			}
			return n.Status.Allocatable
		}
	}
	return m
}

// needsAPIForAuth reports whether the node API's authentication or authorization asks the API server.
func needsAPIForAuth(kc *kubeletconfigv1beta1.KubeletConfiguration) bool {
	webhookAuthn := kc.Authentication.Webhook.Enabled != nil && *kc.Authentication.Webhook.Enabled
	return webhookAuthn || kc.Authorization.Mode == kubeletconfigv1beta1.KubeletAuthorizationModeWebhook
}

// nodeServer is the node API on the kubelet's port (10250): logs, exec, attach, port-forward, stats; the
// read-only port when readOnlyPort is set; and container log rotation, which runs even with enableServer
// false.
func (a *agent) nodeServer(restCfg *rest.Config, store *staticpods.Store) (*server.Server, error) {
	kc := &a.cfg.Kubelet
	var kube kubernetes.Interface
	if !a.standalone {
		cs, err := kubernetes.NewForConfig(restCfg)
		if err != nil {
			return nil, err
		}
		kube = cs
	}
	disabled := kc.EnableServer != nil && !*kc.EnableServer
	if !disabled && a.standalone && needsAPIForAuth(kc) {
		// The kubelet refuses to start here; nodelet runs its static pods and leaves the node API off,
		// since it could not authenticate or authorize a single request.
		ctrl.Log.Error(nil, "Node API server disabled: webhook authentication/authorization needs an API server (standalone mode)")
		disabled = true
	}
	tlsOpts, err := config.ParseTLS(kc)
	if err != nil {
		return nil, err
	}
	m := machine.Reader{FsPath: a.cfg.RootDir}
	return server.New(server.Options{
		Address: kc.Address, Port: kc.Port, TLSCertFile: kc.TLSCertFile, TLSPrivateKeyFile: kc.TLSPrivateKeyFile,
		CertDir: a.cfg.CertDirectory(), NodeName: a.cfg.NodeName,
		Auth: kc.Authentication, Authz: kc.Authorization, Kube: kube, Runtime: a.cri, Pods: a.nodePods(store),
		Metrics: ctrlmetrics.Registry, Configz: kc, PodLogsDir: kc.PodLogsDir, ContainerLogMaxSize: kc.ContainerLogMaxSize,
		ContainerLogMaxFiles: derefInt32(kc.ContainerLogMaxFiles, 5), Clock: clock.RealClock{},
		NodeStats:     func(context.Context) (server.NodeStats, error) { return nodeStats(m) },
		DisableServer: disabled, DisableDebuggingHandlers: kc.EnableDebuggingHandlers != nil && !*kc.EnableDebuggingHandlers,
		TLSMinVersion: tlsOpts.MinVersion, TLSCipherSuites: tlsOpts.CipherSuites, TLSCurvePreferences: tlsOpts.CurvePreferences,
		ReadOnlyPort: kc.ReadOnlyPort,
	})
}

// nodeStats are the node figures of /stats/summary, from /proc and the root dir's filesystem.
func nodeStats(m machine.Reader) (server.NodeStats, error) {
	u, err := m.Usage()
	if err != nil {
		return server.NodeStats{}, err
	}
	sig, err := m.Signals()
	if err != nil {
		return server.NodeStats{}, err
	}
	now := metav1.Now()
	working := u.MemoryTotalBytes - u.MemoryAvailableBytes
	capacity, avail := uint64(sig.NodeFsCapacityBytes), uint64(sig.NodeFsAvailableBytes)
	used := capacity - avail
	inodes, free := uint64(sig.NodeFsInodes), uint64(sig.NodeFsInodesFree)
	return server.NodeStats{
		StartTime: u.BootTime,
		CPU:       statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: &u.CPUUsageNanoSeconds},
		Memory: statsapi.MemoryStats{Time: now, WorkingSetBytes: &working, UsageBytes: &working,
			AvailableBytes: &u.MemoryAvailableBytes},
		Fs: statsapi.FsStats{Time: now, CapacityBytes: &capacity, AvailableBytes: &avail, UsedBytes: &used,
			Inodes: &inodes, InodesFree: &free},
	}, nil
}

// nodePods lists the pods this node runs for the node API: the API's pods bound here (mirror pods left
// out) and the static pods, whose UIDs are the ones on their containers.
func (a *agent) nodePods(store *staticpods.Store) server.PodsFunc {
	return func(ctx context.Context) ([]corev1.Pod, error) {
		var out []corev1.Pod
		if !a.standalone {
			var l corev1.PodList
			if err := a.mgr.GetClient().List(ctx, &l); err != nil {
				return nil, err
			}
			for _, p := range l.Items {
				if !podrules.IsMirrorPod(&p) && p.Spec.NodeName == a.cfg.NodeName {
					out = append(out, p)
				}
			}
		}
		if store != nil {
			for _, p := range store.List() {
				out = append(out, *p)
			}
		}
		return out, nil
	}
}

// staticKinds are the static pod sources the configuration names.
func (a *agent) staticKinds() []string {
	var kinds []string
	if a.cfg.Kubelet.StaticPodPath != "" {
		kinds = append(kinds, staticpods.SourceFile)
	}
	if a.cfg.Kubelet.StaticPodURL != "" {
		kinds = append(kinds, staticpods.SourceHTTP)
	}
	return kinds
}

// staticPods starts the static pod sources the configuration names (nil when it names none).
func (a *agent) staticPods(recorder record.EventRecorder) *staticpods.Store {
	kc := &a.cfg.Kubelet
	if kc.StaticPodPath == "" && kc.StaticPodURL == "" {
		return nil
	}
	nodeRef := &corev1.ObjectReference{Kind: "Node", Name: a.cfg.NodeName, UID: types.UID(a.cfg.NodeName)}
	log := ctrl.Log.WithName("staticpods")
	report := func(reason, message string) {
		log.Info("Static pod source problem", "reason", reason, "message", message)
		recorder.Event(nodeRef, corev1.EventTypeWarning, reason, message)
	}
	store := staticpods.NewStore(a.cfg.NodeName, report)
	if kc.StaticPodPath != "" {
		a.local = append(a.local, &staticpods.FileSource{Path: kc.StaticPodPath, Period: kc.FileCheckFrequency.Duration,
			NodeName: a.cfg.NodeName, Clock: clock.RealClock{}, Store: store, Report: report})
	}
	if kc.StaticPodURL != "" {
		header := http.Header{}
		for k, vs := range kc.StaticPodURLHeader {
			for _, v := range vs {
				header.Add(k, v)
			}
		}
		a.local = append(a.local, &staticpods.URLSource{URL: kc.StaticPodURL, Header: header, Period: kc.HTTPCheckFrequency.Duration,
			NodeName: a.cfg.NodeName, Clock: clock.RealClock{}, Store: store, Report: report})
	}
	return store
}

func restConfig(cfg *config.Config) (*rest.Config, error) {
	if cfg.Kubeconfig == "" {
		// Standalone: the manager needs a config, but nothing in standalone mode talks to an API server.
		return &rest.Config{Host: "https://127.0.0.1:1"}, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	rc.QPS = float32(derefInt32(cfg.Kubelet.KubeAPIQPS, 50))
	rc.Burst = int(cfg.Kubelet.KubeAPIBurst)
	rc.UserAgent = "nodelet/" + version
	return rc, nil
}

// newManager builds the manager with caches scoped to what a node may see: its own Node and the pods
// bound to it. Secrets, ConfigMaps and Leases are never cached (the Node authorizer allows no list/watch).
func newManager(restCfg *rest.Config, cfg *config.Config) (ctrl.Manager, error) {
	metricsAddr := cfg.MetricsBindAddress
	healthAddr := "0"
	if cfg.Kubelet.HealthzPort != nil && *cfg.Kubelet.HealthzPort > 0 {
		healthAddr = net.JoinHostPort(cfg.Kubelet.HealthzBindAddress, strconv.Itoa(int(*cfg.Kubelet.HealthzPort)))
	}
	return ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 clientgoscheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: healthAddr,
		LeaderElection:         false,
		Cache:                  controllers.CacheOptions(cfg.NodeName),
		MapperProvider: func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
			return controllers.RESTMapper(), nil
		},
		Client: controllers.ClientOptions(),
	})
}

// eventRecorder records core/v1 events as the kubelet does (source component "kubelet", host = node).
func eventRecorder(ctx context.Context, restCfg *rest.Config, nodeName string, standalone bool) (record.EventRecorder, error) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartStructuredLogging(4)
	if !standalone {
		cs, err := kubernetes.NewForConfig(restCfg)
		if err != nil {
			return nil, err
		}
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	}
	return b.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "kubelet", Host: nodeName}), nil
}

func nodeIPs(cfg *config.Config) ([]net.IP, error) {
	if len(cfg.NodeIPs) > 0 {
		return cfg.NodeIPs, nil
	}
	ip, err := controllers.DetectNodeIP(cfg.Hostname, net.LookupIP, utilnet.ChooseHostInterface)
	if err != nil {
		return nil, err
	}
	return []net.IP{ip}, nil
}

func podReconciler(mgr ctrl.Manager, cfg *config.Config, cri *runtime.Client, pleg *runtime.PLEG, rec record.EventRecorder, ips []net.IP, standalone bool) *controllers.PodReconciler {
	kc := &cfg.Kubelet
	hostIPs := make([]string, 0, len(ips))
	for _, ip := range ips {
		hostIPs = append(hostIPs, ip.String())
	}
	r := &controllers.PodReconciler{
		Client: mgr.GetClient(), Runtime: cri, PLEG: pleg, Recorder: rec, Clock: clock.RealClock{},
		Secrets:  controllers.APIObjects{Reader: mgr.GetAPIReader()},
		NodeName: cfg.NodeName, RootDir: cfg.RootDir, HostIPs: hostIPs,
		Sandbox: runtime.SandboxOptions{
			ClusterDNS: kc.ClusterDNS, ClusterDomain: kc.ClusterDomain, ResolvConf: derefString(kc.ResolverConfig),
			PodLogsDir: kc.PodLogsDir, CgroupDriver: kc.CgroupDriver, CgroupsPerQOS: kc.CgroupsPerQOS == nil || *kc.CgroupsPerQOS,
			CgroupRoot: kc.CgroupRoot, NodeHostname: cfg.Hostname,
		},
		Workers: 32, ImagePulls: int(derefInt32(kc.MaxParallelImagePulls, 5)), ResyncPeriod: kc.SyncFrequency.Duration,
		Node: func(ctx context.Context) (*corev1.Node, error) {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second) // the cache blocks while the API is away
			defer cancel()
			n := &corev1.Node{}
			return n, mgr.GetClient().Get(ctx, client.ObjectKey{Name: cfg.NodeName}, n)
		},
	}
	r.SeccompDefault = kc.SeccompDefault != nil && *kc.SeccompDefault
	if standalone {
		r.Client, r.Secrets, r.Node = nil, nil, nil
	}
	r.RegisterMetrics(ctrlmetrics.Registry)
	return r
}

// sysctlAllowlist is the kubelet's sysctl admission: the safe sysctls this kernel namespaces, plus
// allowedUnsafeSysctls. Without a kernel version, only the safe sysctls any kernel has are allowed.
func sysctlAllowlist(ctx context.Context, cfg *config.Config) (*controllers.SysctlAllowlist, error) {
	release, err := machine.Reader{}.KernelRelease()
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Kernel version unknown, dropping the safe sysctls that need a recent kernel")
	}
	a, err := controllers.NewSysctlAllowlist(release, cfg.Kubelet.AllowedUnsafeSysctls)
	if err != nil {
		return nil, fmt.Errorf("allowedUnsafeSysctls: %w", err)
	}
	return a, nil
}

// hardening wires the pod cgroups (podPidsLimit) and the image pull credential verification into the pod
// controller, each only where it applies (a nil pointer must not become a non-nil interface).
func (a *agent) hardening(pods *controllers.PodReconciler, connector *runtime.Connector) error {
	cg, err := podCgroups(&a.cfg.Kubelet)
	if err != nil {
		return err
	}
	if cg != nil {
		pods.PodCgroups = cg
	}
	records, err := a.pullRecords(connector)
	if err != nil {
		return err
	}
	if records != nil {
		pods.PullRecords = records
	}
	return nil
}

// podCgroups makes pod cgroups with podPidsLimit, where nodelet can: the cgroupfs driver with cgroupsPerQOS
// (without cgroupsPerQOS the kubelet makes no pod cgroups either; the systemd driver gets a start-up notice).
func podCgroups(kc *kubeletconfigv1beta1.KubeletConfiguration) (*podcgroups.Manager, error) {
	if kc.CgroupsPerQOS != nil && !*kc.CgroupsPerQOS || kc.CgroupDriver == "systemd" {
		return nil, nil
	}
	m, err := podcgroups.New(podcgroups.DefaultRoot, path.Join("/", kc.CgroupRoot, "kubepods"), derefInt64(kc.PodPidsLimit, -1))
	if err != nil {
		return nil, fmt.Errorf("pod cgroups: %w", err)
	}
	return m, nil
}

// pullRecords is the kubelet's image pull credential verification (KubeletEnsureSecretPulledImages, on by
// default): records under <root-dir>/image_manager; the pull intents an earlier run left are turned into
// records once the runtime answers.
func (a *agent) pullRecords(connector *runtime.Connector) (*imagepull.Manager, error) {
	kc := &a.cfg.Kubelet
	if !config.EnsureSecretPulledImages(kc) {
		return nil, nil
	}
	policy, err := imagepull.NewPolicy(kc.ImagePullCredentialsVerificationPolicy, kc.PreloadedImagesVerificationAllowlist)
	if err != nil {
		return nil, fmt.Errorf("imagePullCredentialsVerificationPolicy: %w", err)
	}
	records, err := imagepull.NewFileRecords(a.cfg.RootDir)
	if err != nil {
		return nil, err
	}
	m := imagepull.NewManager(records, policy, clock.RealClock{})
	a.local = append(a.local, manager.RunnableFunc(func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return nil
		case <-connector.Connected():
		}
		images, err := a.cri.ListImages(ctx, nil)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to list images, image pull intents of an earlier run are kept")
			return nil
		}
		m.Initialize(ctx, runtimeImages(images))
		return nil
	}))
	return m, nil
}

// runtimeImages are the runtime's images as the pull records see them: ID and every tag and digest.
func runtimeImages(images []*runtimeapi.Image) []imagepull.Image {
	out := make([]imagepull.Image, 0, len(images))
	for _, img := range images {
		out = append(out, imagepull.Image{ID: img.Id, Tags: append(append([]string(nil), img.RepoTags...), img.RepoDigests...)})
	}
	return out
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

func nodeReconciler(mgr ctrl.Manager, cfg *config.Config, cri *runtime.Client, rec record.EventRecorder, ips []net.IP) (*controllers.NodeReconciler, error) {
	kc := &cfg.Kubelet
	reserved, err := cfg.Reserved()
	if err != nil {
		return nil, err
	}
	hard, err := config.ParseThresholds(kc.EvictionHard)
	if err != nil {
		return nil, err
	}
	return &controllers.NodeReconciler{
		Client: mgr.GetClient(), Recorder: rec, Runtime: cri, Clock: clock.RealClock{},
		Machine:  machine.Reader{FsPath: cfg.RootDir},
		NodeName: cfg.NodeName, Hostname: cfg.Hostname, NodeIPs: ips,
		Labels: cfg.NodeLabels, Taints: kc.RegisterWithTaints, ProviderID: kc.ProviderID,
		MaxPods: int64(kc.MaxPods), MaxImages: derefInt32(kc.NodeStatusMaxImages, 50), Port: kc.Port,
		Reserved: reserved, HardEviction: hard,
		KubeletVersion:           kubeVersion + "+nodelet",
		UpdateFrequency:          kc.NodeStatusUpdateFrequency.Duration,
		ReportFrequency:          kc.NodeStatusReportFrequency.Duration,
		PressureTransitionPeriod: kc.EvictionPressureTransitionPeriod.Duration,
	}, nil
}

func secondsDuration(s int32) time.Duration { return time.Duration(s) * time.Second }

func derefInt32(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// noAPI answers volume look-ups in standalone mode, where there is no API server to read from.
type noAPI struct{}

var errNoAPI = errors.New("no API server in standalone mode")

func (noAPI) GetConfigMap(context.Context, string, string) (*corev1.ConfigMap, error) {
	return nil, errNoAPI
}
func (noAPI) GetSecret(context.Context, string, string) (*corev1.Secret, error) { return nil, errNoAPI }
func (noAPI) CreateToken(context.Context, string, string, *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return nil, errNoAPI
}
