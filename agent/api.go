package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/controllers"
	"github.com/nodelet/nodelet/internal/periodic"
)

// RestConfig is the client configuration of --kubeconfig, with the kubelet's kubeAPIQPS and kubeAPIBurst;
// without a kubeconfig (standalone mode) a placeholder nothing talks to.
func RestConfig(cfg *config.Config, version string) (*rest.Config, error) {
	if cfg.Kubeconfig == "" {
		// Standalone: the manager needs a config, but nothing in standalone mode talks to an API server.
		return &rest.Config{Host: "https://127.0.0.1:1"}, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	TuneRestConfig(rc, cfg, version)
	return rc, nil
}

// TuneRestConfig sets the kubelet's kubeAPIQPS and kubeAPIBurst and nodelet's user agent on rc.
func TuneRestConfig(rc *rest.Config, cfg *config.Config, version string) {
	rc.QPS = float32(derefInt32(cfg.Kubelet.KubeAPIQPS, 50))
	rc.Burst = int(cfg.Kubelet.KubeAPIBurst)
	rc.UserAgent = "nodelet/" + version
}

// newManager builds the manager with caches scoped to what a node may see: its own Node and the pods
// bound to it. Secrets, ConfigMaps and Leases are never cached (the Node authorizer allows no list/watch).
// Controller names repeat across the nodes of one process, so their uniqueness is not enforced.
func (a *Agent) newManager(restCfg *rest.Config) (ctrl.Manager, error) {
	cfg := a.cfg
	healthAddr := "0"
	if cfg.Kubelet.HealthzPort != nil && *cfg.Kubelet.HealthzPort > 0 {
		healthAddr = net.JoinHostPort(cfg.Kubelet.HealthzBindAddress, strconv.Itoa(int(*cfg.Kubelet.HealthzPort)))
	}
	opts := ctrl.Options{
		Scheme:                 clientgoscheme.Scheme,
		Logger:                 a.log,
		Metrics:                metricsserver.Options{BindAddress: cfg.MetricsBindAddress},
		HealthProbeBindAddress: healthAddr,
		LeaderElection:         false,
		Cache:                  controllers.CacheOptions(cfg.NodeName),
		MapperProvider: func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
			return controllers.RESTMapper(), nil
		},
		Client:     controllers.ClientOptions(),
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	}
	if a.loops != nil {
		// The manager's runnables run under a context of its own: it carries the loop cost observer too.
		opts.BaseContext = func() context.Context { return periodic.WithObserver(context.Background(), a.loops) }
	}
	return ctrl.NewManager(restCfg, opts)
}

// eventRecorder records core/v1 events as the kubelet does (source component "kubelet", host = node).
func (a *Agent) eventRecorder(ctx context.Context, restCfg *rest.Config) (record.EventRecorder, error) {
	if a.opts.Recorder != nil {
		return a.opts.Recorder, nil
	}
	b := record.NewBroadcaster(record.WithContext(ctx),
		record.WithCorrelatorOptions(record.CorrelatorOptions{LRUCacheSize: eventCacheSize(a.cfg.Kubelet.MaxPods)}))
	b.StartStructuredLogging(4)
	if err := a.api.recordTo(b, restCfg); err != nil {
		return nil, err
	}
	return b.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "kubelet", Host: a.cfg.NodeName}), nil
}

// eventCacheSize is the number of entries in each of the event correlator's three caches: the events seen
// (to count repeats), the similar events (to aggregate them) and the objects' spam-filter budgets. client-go's
// default, 4096, is sized for a cluster's controllers; a node's events are about its own pods, and every entry
// past its recent pods' is a deleted pod's, kept until evicted. Full, the three caches hold 4.8 MiB of heap at
// 4096 entries and 1.3 MiB at 1024. Eight entries per pod the node may run, at least 1024 and at most
// client-go's default, still hold every running pod's recent events.
func eventCacheSize(maxPods int32) int {
	const least, most = 1024, 4096
	return min(most, max(least, 8*int(maxPods)))
}

// detectNodeIP is the kubelet's node IP: the hostname's address, else the default route's interface's.
func detectNodeIP(hostname string) ([]net.IP, error) {
	ip, err := controllers.DetectNodeIP(hostname, net.LookupIP, utilnet.ChooseHostInterface)
	if err != nil {
		return nil, err
	}
	return []net.IP{ip}, nil
}

// noAPI answers volume look-ups in standalone mode, where there is no API server to read from.
type noAPI struct{}

var errNoAPI = errors.New("no API server in standalone mode")

func (noAPI) GetConfigMap(context.Context, string, string) (*corev1.ConfigMap, error) {
	return nil, errNoAPI
}
func (noAPI) GetSecret(context.Context, string, string) (*corev1.Secret, error) { return nil, errNoAPI }
func (noAPI) GetPersistentVolumeClaim(context.Context, string, string) (*corev1.PersistentVolumeClaim, error) {
	return nil, errNoAPI
}
func (noAPI) GetPersistentVolume(context.Context, string) (*corev1.PersistentVolume, error) {
	return nil, errNoAPI
}
func (noAPI) CreateToken(context.Context, string, string, *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return nil, errNoAPI
}
