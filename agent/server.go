package agent

import (
	"context"
	"crypto/tls"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/podlifecycle"
	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/server"
	"github.com/nodelet/nodelet/staticpods"
)

// needsAPIForAuth reports whether the node API's authentication or authorization asks the API server.
func needsAPIForAuth(kc *kubeletconfigv1beta1.KubeletConfiguration) bool {
	webhookAuthn := kc.Authentication.Webhook.Enabled != nil && *kc.Authentication.Webhook.Enabled
	return webhookAuthn || kc.Authorization.Mode == kubeletconfigv1beta1.KubeletAuthorizationModeWebhook
}

// nodeServer is the node API on the kubelet's port (10250): logs, exec, attach, port-forward, stats,
// metrics (the prober's at /metrics/probes), pprof, /flagz and /statusz as the debugging handlers,
// profiling handler and zpages gates say; the read-only port when readOnlyPort is set; and container log
// rotation, which runs even with enableServer false.
func (h host) nodeServer(a *Agent, restCfg *rest.Config, store *staticpods.Store, pods *podlifecycle.Reconciler) (*server.Server, error) {
	kc := &a.cfg.Kubelet
	m := machine.Reader{FsPath: a.cfg.RootDir}
	kubepods := ""
	if kc.CgroupsPerQOS == nil || *kc.CgroupsPerQOS {
		// Its path in the cgroup driver's layout (/kubepods, or /kubepods.slice with systemd).
		kubepods = podrules.KubepodsCgroupName(kc.CgroupRoot).Path(kc.CgroupDriver)
	}
	return h.newNodeServer(a, restCfg, store, pods, nodeFacts{
		stats:    func(context.Context) (server.NodeStats, error) { return nodeStats(m, kubepods) },
		cgroups:  m,
		kubepods: kubepods,
		machine:  func() (server.MachineFacts, error) { return machineFacts(m) },
	})
}

// nodeFacts are where the node API reads the node's own figures: this machine's /proc and cgroups, or a
// simulated machine's (no cgroups: the containers' figures come from the runtime's stats).
type nodeFacts struct {
	stats    func(context.Context) (server.NodeStats, error)
	cgroups  server.CgroupReader
	kubepods string
	machine  func() (server.MachineFacts, error)
}

// newNodeServer is the node API of the agent's configuration, reading the node's figures from facts.
func (h host) newNodeServer(a *Agent, restCfg *rest.Config, store *staticpods.Store, pods *podlifecycle.Reconciler, facts nodeFacts) (*server.Server, error) {
	kc := &a.cfg.Kubelet
	kube, err := a.api.clientset(restCfg)
	if err != nil {
		return nil, err
	}
	disabled := kc.EnableServer != nil && !*kc.EnableServer
	if !disabled && kube == nil && needsAPIForAuth(kc) {
		// The kubelet refuses to start here; nodelet runs its static pods and leaves the node API off,
		// since it could not authenticate or authorize a single request.
		a.log.Error(nil, "Node API server disabled: webhook authentication/authorization needs an API server (standalone mode)")
		disabled = true
	}
	tlsOpts, err := config.ParseTLS(kc)
	if err != nil {
		return nil, err
	}
	registerBuildInfo(a.opts.KubeletVersion)
	registerFeatureGates(kc.FeatureGates, a.log)
	serving, err := h.servingCertificate(a, kube)
	if err != nil {
		return nil, err
	}
	var processes func(types.UID) (uint64, bool)
	if a.podCgroups != nil {
		processes = a.podCgroups.Processes
	}
	var volumeStats func(types.UID) []statsapi.VolumeStats
	if a.volumeMgr != nil {
		volumeStats = a.volumeMgr.Stats
	}
	o := server.Options{
		Address: kc.Address, Port: kc.Port, TLSCertFile: kc.TLSCertFile, TLSPrivateKeyFile: kc.TLSPrivateKeyFile,
		CertDir: a.cfg.CertDirectory(), NodeName: a.cfg.NodeName,
		Auth: kc.Authentication, Authz: kc.Authorization, Kube: kube, Runtime: a.cri, Pods: h.nodePods(a, store),
		Metrics: withLegacyRegistry(a.opts.Metrics), Registerer: a.opts.Metrics, Configz: kc, PodLogsDir: kc.PodLogsDir, ContainerLogMaxSize: kc.ContainerLogMaxSize,
		ContainerLogMaxFiles: derefInt32(kc.ContainerLogMaxFiles, 5), Clock: a.clock(),
		NodeStats:     facts.stats,
		DisableServer: disabled, DisableDebuggingHandlers: kc.EnableDebuggingHandlers != nil && !*kc.EnableDebuggingHandlers,
		TLSMinVersion: tlsOpts.MinVersion, TLSCipherSuites: tlsOpts.CipherSuites, TLSCurvePreferences: tlsOpts.CurvePreferences,
		ReadOnlyPort: kc.ReadOnlyPort, ServingCertificate: serving, PodProcesses: processes,
		PodVolumeStats: volumeStats, KubeletVersion: a.opts.KubeletVersion,
		KubepodsCgroup: facts.kubepods, Machine: facts.machine,
	}
	if facts.cgroups != nil {
		o.Cgroups = facts.cgroups
	}
	if a.probeMetrics != nil {
		o.ProbeMetrics = a.probeMetrics
	}
	if pods != nil {
		o.Timelines = func(namespace, name string) (any, bool) { return pods.Timeline(namespace, name) }
	}
	debugOptions(&o, a.cfg)
	return server.New(o)
}

// debugOptions set the node API's system logs (enableSystemLogHandler, enableSystemLogQuery), profiling
// (enableProfilingHandler, enableContentionProfiling) and zpages
// (the ComponentFlagz and ComponentStatusz gates; /flagz lists the command line, when there is one).
func debugOptions(o *server.Options, cfg *config.Config) {
	kc := &cfg.Kubelet
	o.DisableProfilingHandler = kc.EnableProfilingHandler != nil && !*kc.EnableProfilingHandler
	o.DisableSystemLogHandler = kc.EnableSystemLogHandler != nil && !*kc.EnableSystemLogHandler
	o.SystemLogQuery = kc.EnableSystemLogQuery != nil && *kc.EnableSystemLogQuery
	o.ContentionProfiling = kc.EnableContentionProfiling
	o.DisableStatusz = !config.ComponentStatusz(kc)
	if config.ComponentFlagz(kc) && cfg.Flagz() != nil {
		o.Flagz = server.FlagzFunc(cfg.Flagz)
	}
}

// servingCertificate is the node API's certificate getter with serverTLSBootstrap (nil otherwise, or when the
// agent was given no way to request one: it then serves its self-signed certificate, and says so). The
// certificate manager runs with the node.
func (h host) servingCertificate(a *Agent, kube kubernetes.Interface) (func() *tls.Certificate, error) {
	if !a.cfg.Kubelet.ServerTLSBootstrap || kube == nil {
		return nil, nil
	}
	if a.opts.ServingCertificates == nil {
		a.log.Info("serverTLSBootstrap is set but this agent has no serving certificate manager (agent.Options.ServingCertificates): serving a self-signed certificate")
		return nil, nil
	}
	m, err := a.opts.ServingCertificates(kube, func() []corev1.NodeAddress { return h.nodeAddresses(a) })
	if err != nil {
		return nil, fmt.Errorf("serving certificate manager: %w", err)
	}
	a.local = append(a.local, manager.RunnableFunc(func(ctx context.Context) error {
		m.Start()
		<-ctx.Done()
		m.Stop()
		return nil
	}))
	return m.Current, nil
}

// nodeAddresses are the addresses of the node's Node object (none before it is registered).
func (host) nodeAddresses(a *Agent) []corev1.NodeAddress {
	n := &corev1.Node{}
	if err := a.mgr.GetClient().Get(context.Background(), client.ObjectKey{Name: a.cfg.NodeName}, n); err != nil {
		return nil
	}
	return n.Status.Addresses
}

// machineFacts are the machine_* families of /metrics/cadvisor.
func machineFacts(m machine.Reader) (server.MachineFacts, error) {
	info, err := m.Info()
	if err != nil {
		return server.MachineFacts{}, err
	}
	cores, sockets := m.CPUTopology()
	return server.MachineFacts{Info: info, PhysicalCores: cores, CPUSockets: sockets}, nil
}

// nodeStats are the node figures of /stats/summary, from /proc, the memory cgroups and the root dir's
// filesystem; with a kubepods cgroup, its memory as the "pods" system container.
func nodeStats(m machine.Reader, kubepods string) (server.NodeStats, error) {
	u, err := m.Usage()
	if err != nil {
		return server.NodeStats{}, err
	}
	sig, err := m.Signals()
	if err != nil {
		return server.NodeStats{}, err
	}
	now := metav1.Now()
	// The kubelet's node memory: the root memory cgroup's working set and usage, available = capacity - working set.
	root := sig.RootMemory
	working, usage := uint64(root.WorkingSetBytes), uint64(root.UsageBytes)
	if working == 0 {
		working = u.MemoryTotalBytes - u.MemoryAvailableBytes
		usage = working
	}
	maxPID, procs := sig.PIDMax, sig.PIDsInUse
	mem := memoryStats(now, working, usage, sig)
	if root.UsageBytes > 0 {
		memoryDetail(&mem, root)
	}
	return server.NodeStats{
		StartTime:        u.BootTime,
		CPU:              statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: &u.CPUUsageNanoSeconds},
		Memory:           mem,
		Fs:               nodeFsStats(now, sig),
		Rlimit:           &statsapi.RlimitStats{Time: now, MaxPID: &maxPID, NumOfRunningProcesses: &procs},
		SystemContainers: podsContainer(m, kubepods, now),
		Network:          nodeNetwork(m, now),
	}, nil
}

// nodeNetwork is the host's interfaces, the default one being eth0 as in the kubelet's summary; nil when
// /proc/net/dev cannot be read.
func nodeNetwork(m machine.Reader, now metav1.Time) *statsapi.NetworkStats {
	ifs, err := m.NetDev()
	if err != nil {
		return nil
	}
	n := &statsapi.NetworkStats{Time: now}
	for _, i := range ifs {
		st := statsapi.InterfaceStats{Name: i.Name, RxBytes: ptr.To(i.RxBytes), RxErrors: ptr.To(i.RxErrors),
			TxBytes: ptr.To(i.TxBytes), TxErrors: ptr.To(i.TxErrors)}
		n.Interfaces = append(n.Interfaces, st)
		if i.Name == "eth0" {
			n.InterfaceStats = st
		}
	}
	return n
}

// memoryStats are the node's memory figures: its working set and usage, available as the memory.available
// signal says.
func memoryStats(now metav1.Time, working, usage uint64, sig machine.Signals) statsapi.MemoryStats {
	available := uint64(max(sig.MemoryAvailableBytes, 0))
	return statsapi.MemoryStats{Time: now, WorkingSetBytes: &working, UsageBytes: &usage, AvailableBytes: &available}
}

// memoryDetail adds a memory cgroup's RSS and page faults to st, as the kubelet's summary has them from
// cAdvisor.
func memoryDetail(st *statsapi.MemoryStats, c machine.CgroupMemory) {
	st.RSSBytes = ptr.To(uint64(max(c.RSSBytes, 0)))
	st.PageFaults, st.MajorPageFaults = ptr.To(uint64(max(c.PageFaults, 0))), ptr.To(uint64(max(c.MajorPageFaults, 0)))
}

// nodeFsStats are nodefs's figures as the signals give them.
func nodeFsStats(now metav1.Time, sig machine.Signals) statsapi.FsStats {
	capacity, avail := uint64(max(sig.NodeFsCapacityBytes, 0)), uint64(max(sig.NodeFsAvailableBytes, 0))
	used := capacity - min(avail, capacity)
	inodes, free := uint64(max(sig.NodeFsInodes, 0)), uint64(max(sig.NodeFsInodesFree, 0))
	return statsapi.FsStats{Time: now, CapacityBytes: &capacity, AvailableBytes: &avail, UsedBytes: &used,
		Inodes: &inodes, InodesFree: &free}
}

// podsContainer is the "pods" system container: the kubepods cgroup's memory, its available bytes being
// its limit less its working set (none while it has no limit).
func podsContainer(m machine.Reader, kubepods string, now metav1.Time) []statsapi.ContainerStats {
	if kubepods == "" {
		return nil
	}
	mem, err := m.CgroupMemory(kubepods)
	if err != nil {
		return nil
	}
	ws, usage := uint64(mem.WorkingSetBytes), uint64(mem.UsageBytes)
	st := statsapi.MemoryStats{Time: now, WorkingSetBytes: &ws, UsageBytes: &usage}
	memoryDetail(&st, mem)
	if mem.LimitBytes > 0 {
		avail := uint64(max(mem.LimitBytes-mem.WorkingSetBytes, 0))
		st.AvailableBytes = &avail
	}
	return []statsapi.ContainerStats{{Name: statsapi.SystemContainerPods, Memory: &st}}
}

// nodePods lists the pods this node runs for the node API: the API's pods bound here (mirror pods left
// out) and the static pods, whose UIDs are the ones on their containers.
func (host) nodePods(a *Agent, store *staticpods.Store) server.PodsFunc {
	return func(ctx context.Context) ([]corev1.Pod, error) {
		out, err := a.api.apiPods(ctx, a)
		if err != nil {
			return nil, err
		}
		if store != nil {
			for _, p := range store.List() {
				out = append(out, *p)
			}
		}
		return out, nil
	}
}
