package simnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/internal/kubeclient"
	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/runtime/fake"
)

// Spec is what a user of a simulated node chooses (testnode's Options). Only Name is required.
type Spec struct {
	// Name is the Node's name (a DNS subdomain).
	Name string
	// Labels are added to the Node at registration (as --node-labels).
	Labels map[string]string
	// CPU and Memory are the node's capacity (default 4 CPUs, 8 GiB); MaxPods its pod capacity (default 110).
	CPU, Memory resource.Quantity
	MaxPods     int32
	// NodeIP is the node's InternalIP (default 127.0.0.1).
	NodeIP net.IP
	// Logger receives the node's logs (default: controller-runtime's logger).
	Logger logr.Logger
	// ReadyTimeout bounds how long Start waits for the Node to be Ready (default 30 s).
	ReadyTimeout time.Duration
	// NodeAPI, when set, serves the node API on a free port of NodeIP: containerLogs (what the containers'
	// logs annotations wrote), exec (answered by their exec annotations), /stats/summary and /metrics/resource
	// (their usage annotations), authenticated and authorized as a real node's (webhook authentication and
	// authorization through the API server, client certificates of NodeAPI.ClientCAFile).
	NodeAPI *NodeAPI
}

// NodeAPI is how a simulated node's API authenticates the API server.
type NodeAPI struct {
	// ClientCAFile is the CA of the client certificate the API server presents to nodes
	// (kube-apiserver --kubelet-client-certificate).
	ClientCAFile string
}

// Options configure a simulated node: its Spec and what a process of many nodes shares or tunes.
type Options struct {
	Spec
	// NoWait makes Start return once the node runs, without waiting for it to be Ready.
	NoWait bool
	// Services, when set, is a Service lister shared by the nodes of a process (default: one per node).
	Services agent.ServiceLister
	// RelistPeriod is the PLEG's relist period (default: the kubelet's 1 s); the simulated runtime's
	// events make changes known at once, so hollow nodes relist rarely.
	RelistPeriod time.Duration
	// Workers bounds the pods the node syncs at once (default 32).
	Workers int
	// Recorder, when set, records the node's events (hollow nodes share one broadcaster); default: the
	// node's own recorder, as the kubelet's.
	Recorder record.EventRecorder
	// HousekeepingPeriod is how often the node looks for orphans (default 2 s, the kubelet's).
	HousekeepingPeriod time.Duration
	// Leases, when set, renews the node's Lease in a batch with other nodes (default: its own timer).
	Leases agent.LeaseBatch
	// Metrics registers the node's metrics (default: a registry of its own).
	Metrics ctrlmetrics.RegistererGatherer
	// Clock is the node's clock (default: the wall clock): a fake one makes its heartbeats, back-offs and
	// timestamps follow the test.
	Clock clock.WithTicker
}

// Node is a running test node.
type Node struct {
	name    string
	dir     string
	runtime *fake.Runtime
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
	once    sync.Once
}

// Start registers the Node and runs it until Stop (or ctx ends); it returns once the Node is Ready.
// restConfig is any client configuration allowed to act as the node (envtest's admin configuration, or a
// system:node:<name> credential under the Node authorizer).
func Start(ctx context.Context, restConfig *rest.Config, opts Options) (*Node, error) {
	if opts.Name == "" {
		return nil, errors.New("simnode: Options.Name is required")
	}
	if restConfig == nil {
		return nil, errors.New("simnode: a rest.Config is required")
	}
	dir, err := os.MkdirTemp("", "simnode-")
	if err != nil {
		return nil, err
	}
	n := &Node{name: opts.Name, dir: dir, done: make(chan struct{})}
	if err := n.start(ctx, restConfig, opts); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if opts.NoWait {
		return n, nil
	}
	if err := n.waitReady(ctx, restConfig, opts.ReadyTimeout); err != nil {
		_ = n.Stop()
		return nil, err
	}
	return n, nil
}

func (n *Node) start(ctx context.Context, restConfig *rest.Config, opts Options) error {
	rtOpts := []fake.Option{fake.WithBehaviourFunc(behaviour), fake.WithPullAny(), fake.WithVersion("simulated", "0.1.0")}
	if opts.NodeAPI != nil {
		rtOpts = append(rtOpts, fake.WithStreaming())
	}
	n.runtime = fake.New(rtOpts...)
	endpoint, err := n.runtime.Start(filepath.Join(n.dir, "cri.sock"))
	if err != nil {
		return err
	}
	cfg, err := nodeConfig(opts, n.dir, endpoint)
	if err != nil {
		n.runtime.Stop()
		return err
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = ctrl.Log.WithName("simnode")
	}
	var metrics ctrlmetrics.RegistererGatherer = prometheus.NewRegistry()
	if opts.Metrics != nil {
		metrics = opts.Metrics
	}
	a, err := agent.New(ctx, agent.Options{
		Config: cfg, Version: "simulated", RestConfig: rest.CopyConfig(restConfig), Logger: log,
		Metrics: metrics, Recorder: opts.Recorder, Clock: opts.Clock,
		Services: opts.Services,
		Platform: agent.Simulated(agent.Simulation{Probe: probe, Machine: simulatedMachine(opts), RelistPeriod: opts.RelistPeriod,
			Workers: opts.Workers, Leases: opts.Leases, HousekeepingPeriod: opts.HousekeepingPeriod, NodeAPI: opts.NodeAPI != nil}),
	})
	if err != nil {
		n.runtime.Stop()
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel = cancel
	go func() {
		defer close(n.done)
		n.err = a.Run(runCtx)
	}()
	go func() {
		select {
		case <-ctx.Done():
			cancel()
		case <-n.done:
		}
	}()
	return nil
}

// nodeConfig is the kubelet's default configuration for a node of opts on the simulated runtime.
func nodeConfig(opts Options, dir, endpoint string) (*config.Config, error) {
	cfg := config.Default(opts.Name)
	cfg.RootDir = filepath.Join(dir, "root")
	cfg.MetricsBindAddress = "0"
	cfg.NodeIPs = []net.IP{net.IPv4(127, 0, 0, 1)}
	if opts.NodeIP != nil {
		cfg.NodeIPs = []net.IP{opts.NodeIP}
	}
	for k, v := range opts.Labels {
		cfg.NodeLabels[k] = v
	}
	kc := &cfg.Kubelet
	kc.ContainerRuntimeEndpoint = endpoint
	kc.PodLogsDir = filepath.Join(dir, "logs")
	kc.HealthzPort = ptr.To(int32(0))
	kc.EnableServer = ptr.To(false)
	if opts.NodeAPI != nil {
		port, err := freePort(cfg.NodeIPs[0])
		if err != nil {
			return nil, fmt.Errorf("simnode: a port for the node API: %w", err)
		}
		kc.EnableServer = ptr.To(true)
		kc.Address = cfg.NodeIPs[0].String()
		kc.Port = port
		kc.Authentication.X509.ClientCAFile = opts.NodeAPI.ClientCAFile
	}
	if opts.MaxPods > 0 {
		kc.MaxPods = opts.MaxPods
	}
	if err := config.Validate(cfg); err != nil {
		return nil, fmt.Errorf("simnode: %w", err)
	}
	return cfg, nil
}

// freePort is a TCP port free on ip now.
func freePort(ip net.IP) (int32, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return int32(port), l.Close() //nolint:gosec // a TCP port fits
}

// simulatedMachine is a machine of the options' capacity with plenty of everything free.
func simulatedMachine(opts Options) agent.MachineReader {
	cpu, mem := opts.CPU, opts.Memory
	if cpu.IsZero() {
		cpu = resource.MustParse("4")
	}
	if mem.IsZero() {
		mem = resource.MustParse("8Gi")
	}
	return machine.Static{
		Facts: machine.Info{MachineID: opts.Name, SystemUUID: opts.Name, BootID: opts.Name, KernelVersion: "simulated",
			OSImage: "nodelet simulated node", OS: "linux", Architecture: "amd64", NumCPU: cpu.Value(), MemoryBytes: mem.Value()},
		Observed: machine.Signals{MemoryAvailableBytes: mem.Value(), NodeFsCapacityBytes: 100 << 30, NodeFsAvailableBytes: 90 << 30,
			NodeFsInodes: 10 << 20, NodeFsInodesFree: 9 << 20, PIDMax: 1 << 22, PIDsInUse: 100},
	}
}

// waitReady waits until the Node is registered and Ready, or the node stopped.
func (n *Node) waitReady(ctx context.Context, restConfig *rest.Config, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	cs, err := kubeclient.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-n.done:
			return false, fmt.Errorf("node %s stopped: %w", n.name, n.err)
		default:
		}
		node, err := cs.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not registered yet
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: waiting for Ready: %w", n.name, err)
	}
	return nil
}

// Name is the Node's name.
func (n *Node) Name() string { return n.name }

// Runtime is the node's simulated runtime, to inspect or script further (fake.Runtime's methods).
func (n *Node) Runtime() *fake.Runtime { return n.runtime }

// Stop stops the node and waits for it; it removes nothing from the API server. It returns the error the
// node stopped with, if any. Calling it again returns the same.
func (n *Node) Stop() error {
	n.once.Do(func() {
		n.cancel()
		<-n.done
		n.runtime.Stop()
		_ = os.RemoveAll(n.dir)
	})
	return n.err
}
