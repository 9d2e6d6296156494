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
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/controllers"
	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/probes"
	"github.com/nodelet/nodelet/runtime"
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
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodelet: invalid configuration:", err)
		os.Exit(1)
	}
	log := newLogger(cfg.Verbosity)
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
	if cfg.Kubeconfig == "" {
		return errors.New("--kubeconfig is required: standalone mode (static pods only) is not available yet")
	}
	if err := os.MkdirAll(cfg.RootDir, 0o750); err != nil {
		return fmt.Errorf("create root dir: %w", err)
	}
	log.Info("Starting nodelet", "version", version, "node", cfg.NodeName, "config", cfg.ConfigFile)
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
	if err := setup(ctx, mgr, cfg, cri, restCfg); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

func restConfig(cfg *config.Config) (*rest.Config, error) {
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
		Client:                 controllers.ClientOptions(),
	})
}

func setup(ctx context.Context, mgr ctrl.Manager, cfg *config.Config, cri *runtime.Client, restCfg *rest.Config) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, controllers.PodNodeNameField, controllers.PodNodeName); err != nil {
		return fmt.Errorf("index pods by node: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("runtime", cri.ReadyCheck); err != nil {
		return err
	}
	if err := mgr.Add(&runtime.Connector{Client: cri, Clock: clock.RealClock{}}); err != nil {
		return err
	}
	recorder, err := eventRecorder(ctx, restCfg, cfg.NodeName)
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
	if err := mgr.Add(pleg); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("pleg", func(*http.Request) error { return pleg.Healthy() }); err != nil {
		return err
	}
	node, err := nodeReconciler(mgr, cfg, cri, recorder, ips)
	if err != nil {
		return err
	}
	node.HealthChecks = []controllers.HealthCheck{{Name: "PLEG", Check: pleg.Healthy}}
	if err := node.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up node controller: %w", err)
	}
	pods := podReconciler(mgr, cfg, cri, pleg, recorder, ips)
	pods.Probes = &probes.Manager{Exec: cri, Clock: clock.RealClock{}, Recorder: recorder, OnChange: pods.Enqueue}
	// The pod controller runs beside the manager, not in it: it must not wait for the API's caches.
	go func() {
		if err := pods.Run(ctx, controllers.APIPodSource(mgr.GetCache())); err != nil {
			ctrl.Log.Error(err, "Pod controller stopped")
		}
	}()
	lease := &controllers.LeaseController{
		Client: mgr.GetClient(), Reader: mgr.GetClient(), Clock: clock.RealClock{}, NodeName: cfg.NodeName,
		LeaseDuration: secondsDuration(cfg.Kubelet.NodeLeaseDurationSeconds),
	}
	return lease.SetupWithManager(mgr)
}

// eventRecorder records core/v1 events as the kubelet does (source component "kubelet", host = node).
func eventRecorder(ctx context.Context, restCfg *rest.Config, nodeName string) (record.EventRecorder, error) {
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
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

func podReconciler(mgr ctrl.Manager, cfg *config.Config, cri *runtime.Client, pleg *runtime.PLEG, rec record.EventRecorder, ips []net.IP) *controllers.PodReconciler {
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
		Workers: 16, ImagePulls: int(derefInt32(kc.MaxParallelImagePulls, 5)), ResyncPeriod: kc.SyncFrequency.Duration,
		Node: func(ctx context.Context) (*corev1.Node, error) {
			n := &corev1.Node{}
			return n, mgr.GetClient().Get(ctx, client.ObjectKey{Name: cfg.NodeName}, n)
		},
	}
	r.RegisterMetrics(ctrlmetrics.Registry)
	return r
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
		Labels: cfg.NodeLabels, Taints: kc.RegisterWithTaints,
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
