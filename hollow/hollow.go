package hollow

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/controllers"
	"github.com/nodelet/nodelet/internal/kubeclient"
	"github.com/nodelet/nodelet/podlifecycle"
	"github.com/nodelet/nodelet/simnode"
)

// Options configure a process of hollow nodes.
type Options struct {
	// Kubeconfig reaches the cluster with rights to act as every hollow node (an admin, or a credential
	// the Node authorizer maps to each node); RestConfig, when set, is used instead.
	Kubeconfig string
	RestConfig *rest.Config
	// Nodes is how many nodes to run, named NamePrefix0 … NamePrefix<Nodes-1>.
	Nodes      int
	NamePrefix string
	// StartParallelism bounds the nodes starting at once (default 50).
	StartParallelism int
	// RelistPeriod is each node's PLEG relist period (default 5 min: the simulated runtime's events make
	// changes known at once, as the kubelet's evented PLEG relists every 5 min).
	RelistPeriod time.Duration
	// Workers bounds the pods a node syncs at once (default 4).
	Workers int
	// Verbosity is the log level (-v).
	Verbosity int
	// Logger receives the nodes' logs.
	Logger logr.Logger
	// GCPercent is the Go garbage collector's target (GOGC) for the process; 0 leaves it alone. Hollow
	// nodes default to 25: most of a node's memory is heap headroom at Go's default of 100.
	GCPercent int
	// PprofAddress, when set, serves Go's profiles (net/http/pprof) there, for scale work.
	PprofAddress string
	// NodeAPIClientCA, when set, has every node serve its node API on a port of its own on 127.0.0.1 (its
	// InternalIP then), trusting client certificates of this CA (the API server's
	// --kubelet-client-certificate): kubectl logs and exec reach the hollow pods.
	NodeAPIClientCA string
}

// ParseFlags parses `nodelet hollow` flags.
func ParseFlags(args []string) (Options, error) {
	var o Options
	fs := pflag.NewFlagSet("nodelet hollow", pflag.ContinueOnError)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster the hollow nodes join (required)")
	fs.IntVar(&o.Nodes, "nodes", 1, "number of hollow nodes")
	fs.StringVar(&o.NamePrefix, "name-prefix", "hollow-", "node name prefix; nodes are named <prefix><index>")
	fs.IntVar(&o.StartParallelism, "start-parallelism", 50, "nodes starting at once")
	fs.DurationVar(&o.RelistPeriod, "relist-period", 5*time.Minute, "PLEG relist period of each node")
	fs.IntVar(&o.Workers, "workers", 4, "pods a node syncs at once")
	fs.IntVarP(&o.Verbosity, "v", "v", 0, "log verbosity")
	fs.IntVar(&o.GCPercent, "gc-percent", 25, "the process's GOGC: lower trades CPU for memory (0: Go's default or $GOGC)")
	fs.StringVar(&o.PprofAddress, "pprof-address", "", "serve Go's profiles (net/http/pprof) on this address, e.g. 127.0.0.1:6060")
	fs.StringVar(&o.NodeAPIClientCA, "node-api-client-ca", "", "serve each node's API on 127.0.0.1, trusting client certificates of this CA (the API server's kubelet client certificate)")
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	if o.Kubeconfig == "" {
		return Options{}, errors.New("--kubeconfig is required")
	}
	return o, o.validate()
}

func (o *Options) validate() error {
	switch {
	case o.Nodes < 1:
		return fmt.Errorf("--nodes must be at least 1, not %d", o.Nodes)
	case o.Nodes > 1<<16:
		return fmt.Errorf("--nodes must be at most %d, not %d", 1<<16, o.Nodes)
	case o.NamePrefix == "":
		return errors.New("--name-prefix must not be empty")
	}
	return nil
}

// Run starts the hollow nodes and runs them until ctx ends; it returns the first error that stops one.
func Run(ctx context.Context, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.StartParallelism <= 0 {
		o.StartParallelism = 50
	}
	restCfg := o.RestConfig
	if restCfg == nil {
		rc, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		if err != nil {
			return fmt.Errorf("load kubeconfig %s: %w", o.Kubeconfig, err)
		}
		rc.QPS, rc.Burst = -1, 0 // one client for all nodes: the server's flow control limits it, not the client
		restCfg = rc
	}
	// Uncompressed responses: a gzip reader per watch of every node costs more memory than the
	// bandwidth a test cluster saves.
	restCfg = rest.CopyConfig(restCfg)
	restCfg.DisableCompression = true
	if restCfg.UserAgent == "" {
		restCfg.UserAgent = "nodelet-hollow"
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.PprofAddress != "" {
		go servePprof(ctx, o.PprofAddress, o.Logger)
	}
	if o.GCPercent > 0 {
		debug.SetGCPercent(o.GCPercent)
	}
	services, err := sharedServices(ctx, restCfg)
	if err != nil {
		return err
	}
	events, err := sharedEvents(ctx, restCfg)
	if err != nil {
		return err
	}
	leases := &controllers.LeaseBatch{Clock: clock.RealClock{}}
	go func() { _ = leases.Start(ctx) }()
	nodes, err := startNodes(ctx, restCfg, o, shared{services: services, events: events, leases: leases})
	defer func() {
		for _, n := range nodes {
			_ = n.Stop()
		}
	}()
	if err != nil {
		return err
	}
	o.Logger.Info("Hollow nodes running", "nodes", len(nodes))
	<-ctx.Done()
	return nil
}

// sharedServices is one Service informer for every node of the process (the kubelet's service
// environment variables need the cluster's Services, the same for every node).
func sharedServices(ctx context.Context, restCfg *rest.Config) (*podlifecycle.APIServices, error) {
	c, err := cache.New(restCfg, cache.Options{Scheme: clientgoscheme.Scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Service{}: {Field: fields.OneTermNotEqualSelector("spec.clusterIP", corev1.ClusterIPNone)},
	}})
	if err != nil {
		return nil, err
	}
	services, err := podlifecycle.NewAPIServices(ctx, c)
	if err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	return services, nil
}

// sharedEvents is one event broadcaster for every node of the process; each node records with its own
// source (component kubelet, host its name), as a kubelet does.
func sharedEvents(ctx context.Context, restCfg *rest.Config) (record.EventBroadcaster, error) {
	cs, err := kubeclient.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	return b, nil
}

// startNodes starts o.Nodes nodes, StartParallelism at a time, without waiting for them to be Ready.
// shared is what the nodes of the process share.
type shared struct {
	services agent.ServiceLister
	events   record.EventBroadcaster
	leases   agent.LeaseBatch
}

func startNodes(ctx context.Context, restCfg *rest.Config, o Options, sh shared) ([]*simnode.Node, error) {
	nodes := make([]*simnode.Node, o.Nodes)
	errs := make([]error, o.Nodes)
	sem := make(chan struct{}, o.StartParallelism)
	var wg sync.WaitGroup
	for i := range o.Nodes {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			name := fmt.Sprintf("%s%d", o.NamePrefix, i)
			spec := simnode.Spec{Name: name, NodeIP: nodeIP(i), Logger: o.Logger.WithName(name)}
			if o.NodeAPIClientCA != "" {
				spec.NodeIP, spec.NodeAPI = net.IPv4(127, 0, 0, 1), &simnode.NodeAPI{ClientCAFile: o.NodeAPIClientCA}
			}
			nodes[i], errs[i] = simnode.Start(ctx, restCfg, simnode.Options{
				Spec:   spec,
				NoWait: true, Services: sh.services, Leases: sh.leases,
				RelistPeriod: o.RelistPeriod, Workers: o.Workers, HousekeepingPeriod: time.Minute,
				Recorder: sh.events.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "kubelet", Host: name}),
			})
		}()
	}
	wg.Wait()
	started := nodes[:0]
	for _, n := range nodes {
		if n != nil {
			started = append(started, n)
		}
	}
	return started, errors.Join(errs...)
}

// nodeIP is hollow node i's InternalIP, in 10.64.0.0/10 (distinct for up to 4M nodes).
func nodeIP(i int) net.IP {
	v := 10<<24 | 64<<16 | uint32(i+1)
	return net.IPv4(byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// servePprof serves net/http/pprof's handlers on addr until ctx ends.
func servePprof(ctx context.Context, addr string, log logr.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error(err, "pprof server stopped")
	}
}
