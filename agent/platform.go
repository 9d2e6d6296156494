package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/controllers"
	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/podlifecycle"
	"github.com/nodelet/nodelet/probes"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/pleg"
	"github.com/nodelet/nodelet/server"
	"github.com/nodelet/nodelet/staticpods"
)

// Platform is what a node runs on: the host (Host) or a simulation of one (Simulated). The agent's wiring
// is the same on both; what differs — the host's preparation and facts, the machine the Node reports, the
// probes, volumes and pod cgroups of the pods, the node API server and garbage collectors, how often the
// runtime is relisted — is the platform's.
type Platform interface {
	// prepare readies the host for the node once its root directory exists.
	prepare(a *Agent) error
	// adoptRuntime takes what the runtime decides for the node (its cgroup driver).
	adoptRuntime(ctx context.Context, a *Agent, cri *runtime.Client)
	// plegOptions are the PLEG's settings.
	plegOptions(a *Agent) pleg.Options
	// podParts puts the probes, volumes, pod cgroups and image pull records into the pod workers' deps and
	// returns the probes, whose changes go to the workers once they are built.
	podParts(a *Agent, deps *podlifecycle.Deps, rec record.EventRecorder, connector *runtime.Connector) (*probes.Manager, error)
	// podOptions adjusts the pod workers' settings.
	podOptions(opts *podlifecycle.Options)
	// hostParts wires the node API server, the garbage collectors and the eviction manager.
	hostParts(a *Agent, restCfg *rest.Config, store *staticpods.Store, rec record.EventRecorder, connector *runtime.Connector,
		pods *podlifecycle.Reconciler) error
	// machine is what the Node's capacity and conditions are read from.
	machine(a *Agent) MachineReader
	// renewLease runs the node's Lease renewal.
	renewLease(mgr ctrl.Manager, lease *controllers.LeaseController) error
	// simulated names the platform in the agent's logs.
	simulated() bool
}

// Host is the platform of a real node: this machine's kernel, cgroups, mounts and network.
func Host() Platform { return host{} }

// Simulated runs a node on a simulated runtime (runtime/fake) without touching the host: no pod cgroups,
// no volume files, a node API server only when asked for (Simulation.NodeAPI), no image or container garbage collection, no kernel checks, no image
// pull records on disk, and probes answered by s.Probe instead of the network and the runtime.
func Simulated(s Simulation) Platform { return simulated{s} }

// Simulation are a simulated node's settings.
type Simulation struct {
	// Probe answers the containers' probes; nil makes every probe succeed.
	Probe probes.SimulateFunc
	// Machine reports the node's capacity and signals (default: this machine's).
	Machine MachineReader
	// RelistPeriod is the PLEG's relist period (default 1 s, the kubelet's).
	RelistPeriod time.Duration
	// Workers bounds the pods synced at once (default 32).
	Workers int
	// HousekeepingPeriod is how often orphaned pods, directories and overwritten statuses are looked
	// for (default 2 s, the kubelet's).
	HousekeepingPeriod time.Duration
	// Leases, when set, renews the node's Lease with the other nodes of the process (hollow nodes)
	// instead of on a timer of its own.
	Leases LeaseBatch
	// NodeAPI serves the node API (containerLogs, exec through the runtime's streaming server, stats and
	// metrics of the simulated machine and runtime) as the configuration says: its address and port,
	// authentication and authorization.
	NodeAPI bool
}

// LeaseBatch renews the Leases of the nodes of a process together (controllers.LeaseBatch).
type LeaseBatch interface {
	Member(c *controllers.LeaseController) func(ctx context.Context) error
}

// MachineReader is what the node status asks of the machine.
type MachineReader interface {
	Info() (machine.Info, error)
	Signals() (machine.Signals, error)
}

type host struct{}

func (h host) prepare(a *Agent) error { return h.prepareHost(a) }

func (h host) adoptRuntime(ctx context.Context, a *Agent, cri *runtime.Client) {
	h.cgroupDriverFromRuntime(ctx, a, cri)
}

// plegOptions relist every second, as the kubelet; the container garbage collector, made later, trims a
// pod's dead containers on each death.
func (host) plegOptions(a *Agent) pleg.Options {
	o := pleg.Options{Period: time.Second, Clock: a.clock(), Metrics: a.opts.Metrics, UseEvents: true}
	o.OnContainerDied = func(ev pleg.Event) {
		if c := a.containerDeletor.Load(); c != nil {
			c.ContainerDied(ev)
		}
	}
	return o
}

// podParts: probes over the network and the runtime, the volume manager and its pod certificates, the DRA manager, pod cgroups,
// pull records, the device manager, user namespaces, graceful node shutdown.
func (h host) podParts(a *Agent, deps *podlifecycle.Deps, rec record.EventRecorder, connector *runtime.Connector) (*probes.Manager, error) {
	a.volumeMgr = h.volumes(a, deps.Node)
	a.volumeMgr.Recorder = rec
	claims, err := h.dynamicResources(a, deps)
	if err != nil {
		return nil, err
	}
	h.csiPlugins(a, a.volumeMgr, claims)
	deps.Volumes = a.volumeMgr
	a.local = append(a.local, manager.RunnableFunc(func(ctx context.Context) error { return h.cleanUpStagedVolumes(ctx, a) }))
	if err := a.volumeMgr.RegisterMetrics(a.opts.Metrics); err != nil {
		return nil, fmt.Errorf("register volume metrics: %w", err)
	}
	if err := h.podCertificates(a, rec); err != nil {
		return nil, err
	}
	if err := h.hardening(a, deps, rec, connector); err != nil {
		return nil, err
	}
	if err := h.deviceManager(a, deps); err != nil {
		return nil, err
	}
	if err := h.userNamespaces(a, deps); err != nil {
		return nil, err
	}
	if err := h.shutdownManager(a, deps, rec); err != nil {
		return nil, err
	}
	a.probeMetrics = probes.NewMetrics()
	return &probes.Manager{Exec: a.cri, Clock: a.clock(), Recorder: rec, Metrics: a.probeMetrics}, nil
}

func (host) podOptions(*podlifecycle.Options) {}

func (h host) hostParts(a *Agent, restCfg *rest.Config, store *staticpods.Store, rec record.EventRecorder, connector *runtime.Connector,
	pods *podlifecycle.Reconciler) error {
	return h.setupHost(a, restCfg, store, rec, connector, pods)
}

func (host) machine(a *Agent) MachineReader { return machine.Reader{FsPath: a.cfg.RootDir} }

func (host) renewLease(mgr ctrl.Manager, lease *controllers.LeaseController) error {
	return lease.SetupWithManager(mgr)
}

func (host) simulated() bool { return false }

type simulated struct{ s Simulation }

func (simulated) prepare(*Agent) error                                  { return nil }
func (simulated) adoptRuntime(context.Context, *Agent, *runtime.Client) {}

// plegOptions relist as the simulation says (default every second) with a small event buffer.
func (p simulated) plegOptions(a *Agent) pleg.Options {
	o := pleg.Options{Period: time.Second, Clock: a.clock(), Metrics: a.opts.Metrics, UseEvents: true}
	if p.s.RelistPeriod > 0 {
		o.Period, o.EventBuffer = p.s.RelistPeriod, 64
	}
	return o
}

// podParts: probes answered by the simulation; no volumes (containers get no mounts), cgroups or records.
func (p simulated) podParts(a *Agent, _ *podlifecycle.Deps, rec record.EventRecorder, _ *runtime.Connector) (*probes.Manager, error) {
	probe := p.s.Probe
	if probe == nil {
		probe = func(*corev1.Pod, string, string) bool { return true }
	}
	return &probes.Manager{Clock: a.clock(), Recorder: rec, Simulate: probe}, nil
}

func (p simulated) podOptions(opts *podlifecycle.Options) {
	if p.s.Workers > 0 {
		opts.Workers = p.s.Workers
	}
	opts.HousekeepingPeriod = p.s.HousekeepingPeriod
}

// hostParts: the node API when the simulation serves one, on the simulated machine's figures; no garbage
// collectors or eviction manager.
func (p simulated) hostParts(a *Agent, restCfg *rest.Config, store *staticpods.Store, _ record.EventRecorder, _ *runtime.Connector,
	pods *podlifecycle.Reconciler) error {
	if !p.s.NodeAPI {
		return nil
	}
	srv, err := (host{}).newNodeServer(a, restCfg, store, pods, simulatedFacts(p.machine(a)))
	if err != nil {
		return err
	}
	a.local = append(a.local, srv)
	return nil
}

// simulatedFacts are a simulated machine's figures for the node API: its capacity and signals, no cgroups.
func simulatedFacts(m MachineReader) nodeFacts {
	return nodeFacts{
		stats: func(context.Context) (server.NodeStats, error) {
			info, err := m.Info()
			if err != nil {
				return server.NodeStats{}, err
			}
			sig, err := m.Signals()
			if err != nil {
				return server.NodeStats{}, err
			}
			now := metav1.Now()
			working := uint64(max(info.MemoryBytes-sig.MemoryAvailableBytes, 0))
			return server.NodeStats{
				CPU:    statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: ptr.To(uint64(0))},
				Memory: memoryStats(now, working, working, sig),
				Fs:     nodeFsStats(now, sig),
			}, nil
		},
		machine: func() (server.MachineFacts, error) {
			info, err := m.Info()
			return server.MachineFacts{Info: info, PhysicalCores: int(info.NumCPU), CPUSockets: 1}, err
		},
	}
}

func (p simulated) machine(a *Agent) MachineReader {
	if p.s.Machine != nil {
		return p.s.Machine
	}
	return (host{}).machine(a)
}

func (p simulated) renewLease(mgr ctrl.Manager, lease *controllers.LeaseController) error {
	if p.s.Leases == nil {
		return lease.SetupWithManager(mgr)
	}
	return mgr.Add(manager.RunnableFunc(p.s.Leases.Member(lease)))
}

func (simulated) simulated() bool { return true }

// podCertificates gives the volume manager the issuer of podCertificate projections, when there is an API
// server to request them from, and serves its kubelet_podcertificate_states (where another node of the
// process registered the gauge first, that node's is served).
func (host) podCertificates(a *Agent, rec record.EventRecorder) error {
	pc, err := a.api.podCertificates(a, rec)
	if err != nil || pc == nil {
		return err
	}
	a.volumeMgr.PodCertificates = pc
	if err := a.opts.Metrics.Register(pc.Collector()); err != nil && !isAlreadyRegistered(err) {
		return fmt.Errorf("register pod certificate metrics: %w", err)
	}
	return a.mgr.Add(pc)
}

func isAlreadyRegistered(err error) bool {
	_, ok := errors.AsType[prometheus.AlreadyRegisteredError](err)
	return ok
}
