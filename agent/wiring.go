package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/controllers"
	"github.com/nodelet/nodelet/internal/periodic"
	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/podlifecycle"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/pleg"
	"github.com/nodelet/nodelet/runtime/podconfig"
	"github.com/nodelet/nodelet/staticpods"
	"github.com/nodelet/nodelet/volumes"
)

// setup wires every component; node-local ones go to a.local, API ones into the manager.
func (a *Agent) setup(ctx context.Context, restCfg *rest.Config) error {
	cri := a.cri
	connector := &runtime.Connector{Client: cri, Clock: a.clock()}
	a.local = append(a.local, connector)
	recorder, err := a.eventRecorder(ctx, restCfg)
	if err != nil {
		return err
	}
	ips, err := a.nodeIPs()
	if err != nil {
		return err
	}
	podEvents := pleg.New(cri, a.opts.Platform.plegOptions(a))
	a.local = append(a.local, podEvents)
	if err := a.addChecks(podEvents); err != nil {
		return err
	}
	store := a.staticPods(recorder)
	pods, err := a.podReconciler(ctx, recorder, podEvents, ips, store, connector)
	if err != nil {
		return err
	}
	sources := a.api.podSources(a, pods)
	a.local = append(a.local, manager.RunnableFunc(func(ctx context.Context) error { return pods.Run(ctx, sources...) }))
	if err := a.opts.Platform.hostParts(a, restCfg, store, recorder, connector, pods); err != nil {
		return err
	}
	return a.api.setup(ctx, a, recorder, ips, podEvents, store)
}

// setupAPI wires what needs the API server: the pod index, the Node, its Lease and mirror pods.
func (a *Agent) setupAPI(ctx context.Context, recorder record.EventRecorder, ips []net.IP, podEvents *pleg.PLEG, store *staticpods.Store) error {
	cfg, mgr := a.cfg, a.mgr
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, controllers.PodNodeNameField, controllers.PodNodeName); err != nil {
		return fmt.Errorf("index pods by node: %w", err)
	}
	node, err := a.nodeReconciler(recorder, ips)
	if err != nil {
		return err
	}
	node.HealthChecks = []controllers.HealthCheck{{Name: "PLEG", Check: podEvents.Healthy}}
	if a.volumeMgr != nil {
		// Attachable volumes are mounted once the node's status lists them: a change is written at once.
		node.Volumes, a.volumeMgr.InUseChanged = a.volumeMgr, node.Trigger
	}
	trigger := node.Trigger
	a.nodeTrigger.Store(&trigger) // a device plugin's change, a shutdown: written at once
	if a.devices != nil {
		node.Devices = a.devices
	}
	if a.shutdown != nil {
		node.NotReady = append(node.NotReady, a.shutdown.ShutdownStatus)
	}
	if err := node.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up node controller: %w", err)
	}
	lease := &controllers.LeaseController{
		Client: mgr.GetClient(), Reader: mgr.GetClient(), Clock: a.clock(), NodeName: cfg.NodeName,
		LeaseDuration: secondsDuration(cfg.Kubelet.NodeLeaseDurationSeconds),
	}
	if err := a.opts.Platform.renewLease(mgr, lease); err != nil {
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

// podReconciler is the pod workers, configured as the kubelet's configuration says.
func (a *Agent) podReconciler(ctx context.Context, rec record.EventRecorder, podEvents *pleg.PLEG, ips []net.IP,
	store *staticpods.Store, connector *runtime.Connector) (*podlifecycle.Reconciler, error) {
	deps := podlifecycle.Deps{Runtime: a.cri, PLEG: podEvents, Recorder: rec, Clock: a.clock(),
		Admitters: []podlifecycle.PodAdmitter{&a.evictionAdmit}}
	if err := a.api.podDeps(ctx, a, &deps); err != nil {
		return nil, err
	}
	if store != nil {
		deps.Static = store
	}
	if a.tracer != nil {
		deps.TracerProvider = a.tracer
	}
	// The probes report changes to the reconciler, which is built with them: OnChange is set once it is.
	prober, err := a.opts.Platform.podParts(a, &deps, rec, connector)
	if err != nil {
		return nil, err
	}
	deps.Probes = prober
	opts, err := a.podOptions(ctx, ips)
	if err != nil {
		return nil, err
	}
	r, err := podlifecycle.New(deps, opts)
	if err != nil {
		return nil, err
	}
	prober.OnChange = r.Enqueue
	enqueue := r.EnqueueUIDs
	a.podsTrigger.Store(&enqueue)
	r.RegisterMetrics(a.opts.Metrics)
	nodeName := prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "node_name",
		Help: "The node's name. The count is always 1."}, []string{"node"})
	nodeName.WithLabelValues(a.cfg.NodeName).Set(1)
	if err := a.opts.Metrics.Register(nodeName); err != nil {
		return nil, fmt.Errorf("register kubelet_node_name: %w", err)
	}
	return r, nil
}

// podOptions are the pod workers' settings from the kubelet's configuration.
func (a *Agent) podOptions(ctx context.Context, ips []net.IP) (podlifecycle.Options, error) {
	cfg := a.cfg
	kc := &cfg.Kubelet
	hostIPs := make([]string, 0, len(ips))
	for _, ip := range ips {
		hostIPs = append(hostIPs, ip.String())
	}
	sysctls, err := sysctlAllowlist(ctx, cfg)
	if err != nil {
		return podlifecycle.Options{}, err
	}
	opts := podlifecycle.Options{
		NodeName: cfg.NodeName, RootDir: cfg.RootDir, Standalone: a.api.standalone(), HostIPs: hostIPs,
		Sandbox: podconfig.SandboxOptions{
			ClusterDNS: kc.ClusterDNS, ClusterDomain: kc.ClusterDomain, ResolvConf: derefString(kc.ResolverConfig),
			PodLogsDir: kc.PodLogsDir, CgroupDriver: kc.CgroupDriver, CgroupsPerQOS: kc.CgroupsPerQOS == nil || *kc.CgroupsPerQOS,
			CgroupRoot: kc.CgroupRoot, NodeHostname: cfg.Hostname,
		},
		StaticKinds: a.staticKinds(),
		Workers:     32, ImagePulls: cfg.ImagePullParallelism(), ResyncPeriod: kc.SyncFrequency.Duration,
		Sysctls: sysctls, SeccompDefault: kc.SeccompDefault != nil && *kc.SeccompDefault,
		HostResources: a.hostResources,
	}
	a.opts.Platform.podOptions(&opts)
	return opts, nil
}

// errNodeNotSynced: the node's cache has not listed the Node yet.
var errNodeNotSynced = errors.New("the node cache has not synced")

// getNode reads the node from the cache, which blocks while the API server is away: within 2 s.
func (a *Agent) getNode(ctx context.Context) (*corev1.Node, error) {
	// A read of the cache waits for it to sync, which it cannot while the API server is away (a control
	// plane's static pods starting): until it has, the node is unknown at once.
	if inf, err := a.mgr.GetCache().GetInformer(ctx, &corev1.Node{}, cache.BlockUntilSynced(false)); err == nil && !inf.HasSynced() {
		return nil, errNodeNotSynced
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	n := &corev1.Node{}
	return n, a.mgr.GetClient().Get(ctx, client.ObjectKey{Name: a.cfg.NodeName}, n)
}

// volumes is the volume manager, with the API objects volumes are made from when there is an API server
// (remoteAPI.volumeObjects). node (nil standalone) gives the node's allocatable resources for resourceFieldRef defaults.
func (host) volumes(a *Agent, node func(context.Context) (*corev1.Node, error)) *volumes.Manager {
	m := &volumes.Manager{RootDir: a.cfg.RootDir, Clock: a.clock(), NodeName: a.cfg.NodeName, Objects: noAPI{}}
	a.api.volumeObjects(a, m)
	if node != nil {
		m.AttachedVolumes = func(ctx context.Context) ([]corev1.AttachedVolume, error) {
			n, err := node(ctx)
			if err != nil {
				return nil, err
			}
			return n.Status.VolumesAttached, nil
		}
		m.NodeAllocatable = func() corev1.ResourceList {
			n, err := node(context.Background())
			if err != nil {
				return nil
			}
			return n.Status.Allocatable
		}
	}
	return m
}

// cleanUpStagedVolumes unstages, every minute, the CSI volumes staged on this node that no pod uses any
// more (left by a restart or a takeover).
func (host) cleanUpStagedVolumes(ctx context.Context, a *Agent) error {
	log := logr.FromContextOrDiscard(ctx)
	return periodic.Run(ctx, a.clock(), nil, time.Minute, periodic.Measured(ctx, "csi-unstage", func(ctx context.Context) {
		if err := a.volumeMgr.CleanUpStaged(ctx); err != nil {
			log.Error(err, "Unstaging a CSI volume no pod uses failed; retrying in a minute")
		}
	}))
}

// nodeReconciler keeps the Node registered and its status true.
func (a *Agent) nodeReconciler(rec record.EventRecorder, ips []net.IP) (*controllers.NodeReconciler, error) {
	cfg := a.cfg
	kc := &cfg.Kubelet
	reserved, err := cfg.Reserved()
	if err != nil {
		return nil, err
	}
	hard, err := config.ParseThresholds(kc.EvictionHard)
	if err != nil {
		return nil, err
	}
	r := &controllers.NodeReconciler{
		Client: a.mgr.GetClient(), Recorder: rec, Runtime: a.cri, Clock: a.clock(),
		Machine:  a.opts.Platform.machine(a),
		NodeName: cfg.NodeName, Hostname: cfg.Hostname, NodeIPs: ips,
		Labels: cfg.NodeLabels, Taints: kc.RegisterWithTaints, ProviderID: kc.ProviderID,
		MaxPods: int64(kc.MaxPods), MaxImages: derefInt32(kc.NodeStatusMaxImages, 50), Port: kc.Port,
		Reserved: reserved, HardEviction: hard,
		KubeletVersion:      a.opts.KubeletVersion,
		DeclaredFeatures:    declaredFeatures(a.opts.KubeletVersion),
		ReportUserNamespace: config.KubeletInUserNamespace(kc),
		UpdateFrequency:     kc.NodeStatusUpdateFrequency.Duration,
		ReportFrequency:     kc.NodeStatusReportFrequency.Duration,
	}
	if a.eviction != nil {
		r.Pressure = a.eviction
	}
	r.NoEphemeralStorage = kc.LocalStorageCapacityIsolation != nil && !*kc.LocalStorageCapacityIsolation
	var boot time.Time
	if m, ok := r.Machine.(interface{ Usage() (machine.Usage, error) }); ok {
		if u, err := m.Usage(); err == nil {
			boot = u.BootTime
		}
	}
	r.Startup = controllers.NewNodeStartup(a.clock(), boot)
	if err := r.Startup.Register(a.opts.Metrics); err != nil {
		return nil, fmt.Errorf("register node startup metrics: %w", err)
	}
	return r, nil
}
