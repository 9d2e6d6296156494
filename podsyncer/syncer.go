package podsyncer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/allocation"
	"github.com/nodelet/nodelet/devices"
	"github.com/nodelet/nodelet/dra"
	"github.com/nodelet/nodelet/imagepull"
	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/probes"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
	"github.com/nodelet/nodelet/timeline"
)

// Syncer is the kubelet's pod syncer: SyncPod, SyncTerminatingPod and SyncTerminatedPod, each run on a
// pod's Scope by the pod's worker, which alone decides when. A sync acts on the runtime, the volumes and the
// pod's cgroup, and returns what it did; it never writes the API.
type Syncer struct {
	cri      Runtime
	recorder EventRecorder
	clock    clock.Clock
	secrets  Objects // nil without an API server
	probes   Prober
	volumes  Volumes
	states   PodStates
	statuses StatusCache
	enqueue  func(types.NamespacedName)
	timeline StartTimeline

	rootDir      string
	hostIPs      []string
	sandboxOpts  podconfig.SandboxOptions
	resyncPeriod time.Duration

	config  *configBuilder
	stop    *stopper
	cgroups *cgroupKeeper
	resize  *resizer

	puller         *imagePuller
	crash          *backoff
	sandboxBackoff *backoff
	metrics        *metrics

	mu     sync.Mutex // guards rtName
	rtName string
}

// Deps are what the Syncer works with. Runtime, Recorder, Clock, Node, Statuses, Enqueue and AdmittedPods
// are required; every other dependency is optional, and WithDefaults puts a no-op in place of one not
// given, so the syncer never checks for nil.
type Deps struct {
	// Runtime is the container runtime (runtime.Client).
	Runtime Runtime
	// Recorder records the pods' events.
	Recorder EventRecorder
	// Clock is the syncer's time: back-offs, grace periods, hooks.
	Clock clock.Clock
	// Secrets reads the Secrets, ConfigMaps and RuntimeClasses pods reference (nil: no API server).
	Secrets Objects
	// Node returns the node, for resourceFieldRef defaults and the memory capacity (an error: unknown).
	Node func(ctx context.Context) (*corev1.Node, error)
	// Probes runs the containers' probes (nil: none; every running container is started and ready).
	Probes Prober
	// Volumes prepares and tears down pods' volumes (nil: pods get no volume mounts).
	Volumes Volumes
	// Services are the cluster's Services, for service environment variables (nil: none).
	Services ServiceLister
	// PodCgroups makes and removes pod cgroups (nil: the runtime alone makes them).
	PodCgroups PodCgroups
	// PullRecords checks images on the node against a pod's pull credentials and records pulls (nil: any
	// pod uses an image on the node).
	PullRecords PullRecorder
	// States are the pods' runtime states the PLEG keeps current (nil: every sync reads the runtime).
	States PodStates
	// Statuses is the status manager's cache of the status last set per pod, which a new status builds on.
	Statuses StatusCache
	// Enqueue asks the pod's worker to look at the pod again (background work that finished).
	Enqueue func(types.NamespacedName)
	// AdmittedPods are the pods admitted to the node and not terminated, but except (for the QoS cgroups).
	AdmittedPods func(except types.UID) []*corev1.Pod
	// Actuation records the resources applied to each container, for in-place resizes (nil: kept in
	// memory only).
	Actuation Actuation
	// Devices gives containers the devices of their device plugin resources (nil: none).
	Devices Devices
	// UserNamespaces gives pods that set hostUsers: false their user namespace (nil: none, and such pods
	// fail to start with the kubelet's message).
	UserNamespaces UserNamespaces
	// DynamicResources prepares the pods' ResourceClaims (nil: none can be, and a pod with claims does
	// not start).
	DynamicResources DynamicResources
	// Timeline records the phases of the pods' starts (nil: not recorded).
	Timeline StartTimeline
}

// StartTimeline records that a pod (container "": the pod itself) reached a phase of its start
// (timeline.Recorder).
type StartTimeline interface {
	Mark(pod *corev1.Pod, phase timeline.Phase, container string)
}

// noTimeline records nothing.
type noTimeline struct{}

func (noTimeline) Mark(*corev1.Pod, timeline.Phase, string) {}

// Options are the Syncer's settings. NodeName and RootDir are required.
type Options struct {
	// NodeName is the node's name (service links, events on the node).
	NodeName string
	// RootDir is the agent's root directory (pods' directories are <root>/pods/<uid>).
	RootDir string
	// HostIPs are the node's IPs (the pod IPs of host-network pods).
	HostIPs []string
	// Sandbox configures pod sandboxes: DNS, log directory, cgroups.
	Sandbox podconfig.SandboxOptions
	// ImagePulls bounds the image pulls running at once (default 1).
	ImagePulls int
	// ResyncPeriod is how often a running pod is synced without a trigger (default 1 min).
	ResyncPeriod time.Duration
	// SeccompDefault is seccompDefault: containers that name no seccomp profile run RuntimeDefault.
	SeccompDefault bool
	// HostResources are the node's settings and host facts every container's CRI resources follow.
	HostResources podconfig.HostResources
}

// WithDefaults is d with a no-op in place of each optional dependency not given.
func (d Deps) WithDefaults() Deps {
	if d.Probes == nil {
		d.Probes = noProbes{}
	}
	if d.Volumes == nil {
		d.Volumes = noVolumes{}
	}
	if d.Services == nil {
		d.Services = noServices{}
	}
	if d.PodCgroups == nil {
		d.PodCgroups = noPodCgroups{}
	}
	if d.States == nil {
		d.States = noStates{}
	}
	if d.Actuation == nil {
		d.Actuation = allocation.InMemory()
	}
	if d.Devices == nil {
		d.Devices = noDevices{}
	}
	if d.UserNamespaces == nil {
		d.UserNamespaces = noUserNamespaces{}
	}
	if d.DynamicResources == nil {
		d.DynamicResources = noDynamicResources{}
	}
	if d.Timeline == nil {
		d.Timeline = noTimeline{}
	}
	return d
}

// New builds the syncer; it fails naming the required dependencies or settings that are missing.
func New(deps Deps, opts Options) (*Syncer, error) {
	var missing []string
	for _, f := range []struct {
		name  string
		unset bool
	}{
		{"Deps.Runtime", deps.Runtime == nil}, {"Deps.Recorder", deps.Recorder == nil}, {"Deps.Clock", deps.Clock == nil},
		{"Deps.Node", deps.Node == nil}, {"Deps.Statuses", deps.Statuses == nil}, {"Deps.Enqueue", deps.Enqueue == nil},
		{"Deps.AdmittedPods", deps.AdmittedPods == nil},
		{"Options.NodeName", opts.NodeName == ""}, {"Options.RootDir", opts.RootDir == ""},
	} {
		if f.unset {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("podsyncer.New: missing %v", missing)
	}
	deps = deps.WithDefaults()
	s := &Syncer{
		cri: deps.Runtime, recorder: deps.Recorder, clock: deps.Clock, secrets: deps.Secrets,
		probes: deps.Probes, volumes: deps.Volumes, states: deps.States, statuses: deps.Statuses, enqueue: deps.Enqueue,
		timeline: deps.Timeline,

		rootDir: opts.RootDir, hostIPs: opts.HostIPs, sandboxOpts: opts.Sandbox, resyncPeriod: opts.ResyncPeriod,
		metrics: newMetrics(nil),
	}
	if s.resyncPeriod <= 0 {
		s.resyncPeriod = time.Minute
	}
	s.config = &configBuilder{cri: s.cri, recorder: s.recorder, secrets: s.secrets, node: deps.Node, volumes: s.volumes,
		services: deps.Services, devices: deps.Devices, userns: deps.UserNamespaces, dra: deps.DynamicResources, nodeName: opts.NodeName, rootDir: s.rootDir, hostIPs: s.hostIPs, sandboxOpts: s.sandboxOpts,
		seccompDefault: opts.SeccompDefault, hostResources: opts.HostResources}
	s.stop = &stopper{cri: s.cri, recorder: s.recorder, clock: s.clock, hostIPs: s.hostIPs, readPod: s.ReadPod,
		changed: s.changed, enqueue: s.enqueue, hookMetrics: func() *metrics { return s.metrics }}
	s.cgroups = &cgroupKeeper{podCgroups: deps.PodCgroups, admittedPods: deps.AdmittedPods, recorder: s.recorder,
		sandboxOpts: s.sandboxOpts}
	s.resize = &resizer{cri: s.cri, actuation: deps.Actuation, config: s.config, cgroups: s.cgroups, changed: s.changed, keep: s.keep,
		clock: s.clock}
	s.resize.duration.Store(s.metrics.resizeDuration)
	s.puller = newImagePuller(s.cri, s.clock, opts.ImagePulls, s.recorder, deps.PullRecords, func(key string) {
		ns, name, _ := toolscache.SplitMetaNamespaceKey(key)
		s.enqueue(types.NamespacedName{Namespace: ns, Name: name})
	})
	s.crash = newBackoff(s.clock, backoffInitial, backoffMax)
	s.sandboxBackoff = newBackoff(s.clock, sandboxRetryInitial, sandboxRetryMax)
	return s, nil
}

// configBuilder builds what a pod's sandbox and containers are made from: the CRI configs, the
// environment (Secrets, ConfigMaps, Services, the downward API), the mounts and devices, the files on the
// host, the pull credentials.
type configBuilder struct {
	cri            Runtime
	recorder       EventRecorder
	secrets        Objects // nil without an API server
	node           func(ctx context.Context) (*corev1.Node, error)
	volumes        Volumes
	services       ServiceLister
	devices        Devices
	dra            DynamicResources
	userns         UserNamespaces
	nodeName       string
	rootDir        string
	hostIPs        []string
	sandboxOpts    podconfig.SandboxOptions
	seccompDefault bool
	hostResources  podconfig.HostResources
}

// stopper stops containers (preStop hooks, stop order, the time left of the grace period) and runs
// lifecycle hooks; a failed postStart hook stops its container.
type stopper struct {
	cri      Runtime
	recorder EventRecorder
	clock    clock.Clock
	hostIPs  []string
	readPod  func(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, uint64, error)
	changed  func(uid types.UID)
	enqueue  func(types.NamespacedName)
	// hookMetrics are the syncer's metrics (set once, before pods run).
	hookMetrics func() *metrics
}

// cgroupKeeper makes a pod's cgroup before its sandbox and removes it after, keeping the QoS cgroups up
// to date with the admitted pods.
type cgroupKeeper struct {
	podCgroups   PodCgroups
	admittedPods func(except types.UID) []*corev1.Pod
	recorder     EventRecorder
	sandboxOpts  podconfig.SandboxOptions
}

// GC forgets the back-off entries that expired (housekeeping calls it).
func (s *Syncer) GC() {
	s.crash.GC()
	s.sandboxBackoff.GC()
}

// Forget drops what the syncer keeps for a pod whose worker is gone: its image pulls, probes and state.
func (s *Syncer) Forget(uid types.UID, key types.NamespacedName) {
	s.puller.Forget(key.String())
	s.probes.RemovePod(uid)
	s.states.Forget(uid)
}

// Runtime is what the syncer asks of the container runtime (runtime.Client).
type Runtime interface {
	ImageService
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
	GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error)
	SandboxStatus(ctx context.Context, id string) (*runtimeapi.PodSandboxStatus, error)
	ReadContainer(ctx context.Context, id, sandboxID string) (*runtime.ContainerStatus, error)
	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error)
	StopPodSandbox(ctx context.Context, id string) error
	RemovePodSandbox(ctx context.Context, id string) error
	CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, id string) error
	StopContainer(ctx context.Context, id string, timeout int64) error
	UpdateContainerResources(ctx context.Context, id string, linux *runtimeapi.LinuxContainerResources) error
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	RemoveContainer(ctx context.Context, id string) error
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error)
}

// ImageService is what the image puller asks of the runtime.
type ImageService interface {
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error)
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error)
}

// EventRecorder is the part of client-go's record.EventRecorder the syncer uses.
type EventRecorder interface {
	Event(object apiruntime.Object, eventtype, reason, message string)
	Eventf(object apiruntime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Objects fetches the Secrets, ConfigMaps and RuntimeClasses a pod references, by name (a node may not
// list them).
type Objects interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	RuntimeHandler(ctx context.Context, runtimeClassName string) (string, error)
}

// Prober is what the syncer asks of the probes (probes.Manager).
type Prober interface {
	probeResults
	Sync(pod *corev1.Pod, podIPs []string, containers []probes.ContainerInfo)
	RemovePod(uid types.UID)
	Ready(containerID string) (ready, known bool)
}

// Devices is what the syncer asks of the device manager (devices.Manager): what a container's device
// plugin resources add to its CRI config (nil: nothing), after the plugins that ask for it were told
// that the container starts.
type Devices interface {
	RunContainerOptions(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (*devices.RunOptions, error)
	// AllocatedResourcesStatus is the health of a container's devices, by resource (its
	// allocatedResourcesStatus).
	AllocatedResourcesStatus(podUID types.UID, container string) []corev1.ResourceStatus
}

// DynamicResources is what the syncer asks of the DRA manager (dra.Manager): a pod's ResourceClaims
// prepared before its sandbox is made, the CDI devices they give a container, and their release once the
// pod's containers have stopped.
type DynamicResources interface {
	PrepareResources(ctx context.Context, pod *corev1.Pod) error
	CDIDevices(pod *corev1.Pod, c *corev1.Container) ([]*runtimeapi.CDIDevice, error)
	UnprepareResources(ctx context.Context, uid types.UID) error
	// AllocatedResourcesStatus is the health of the devices of a container's claims.
	AllocatedResourcesStatus(pod *corev1.Pod, container string) []corev1.ResourceStatus
}

// UserNamespaces is what the syncer asks of the user namespace manager (userns.Manager): the user
// namespace a pod's sandbox and containers run in on a runtime handler (the node's unless the pod sets
// hostUsers: false), and its release once the pod has terminated.
type UserNamespaces interface {
	PodUserNamespace(ctx context.Context, pod *corev1.Pod, runtimeHandler string) (*runtimeapi.UserNamespace, error)
	Release(uid types.UID)
}

// Volumes is what the syncer asks of the volume manager (volumes.Manager).
type Volumes interface {
	SetUp(ctx context.Context, pod *corev1.Pod) []error
	Mounts(pod *corev1.Pod, c *corev1.Container, env map[string]string) ([]*runtimeapi.Mount, error)
	Devices(pod *corev1.Pod, c *corev1.Container) ([]*runtimeapi.Device, error)
	HostPath(pod *corev1.Pod, volume string) (string, error)
	Ready(uid types.UID) bool
	TearDown(ctx context.Context, uid types.UID) error
}

// ServiceLister is the cluster's Services, for service environment variables.
type ServiceLister interface {
	// HasSynced tells whether the Services have been listed at least once.
	HasSynced() bool
	ListServices(ctx context.Context) ([]corev1.Service, error)
}

// PodCgroups is what the syncer asks of the pod cgroups (podcgroups.Manager).
type PodCgroups interface {
	Ensure(parent string, res podrules.PodCgroup) error
	UpdateQoS(burstableMilliCPU int64) error
	Remove(uid types.UID) error
	List() []types.UID
}

// PullRecorder verifies images already on the node against a pod's pull credentials and records the
// pulls that make them usable (imagepull.Manager; the KubeletEnsureSecretPulledImages feature).
type PullRecorder interface {
	MustPull(ctx context.Context, image, imageRef string, podSecrets func() ([]imagepull.Secret, error)) (bool, error)
	RecordPullIntent(image string) error
	RecordPulled(ctx context.Context, image, imageRef string, creds *kubeletconfigv1beta1.ImagePullCredentials)
	RecordPullFailed(ctx context.Context, image string)
}

// PodStates is the pods' runtime state the PLEG keeps current (pleg.PodCache): a sync starts from a
// pod's state while it is current, and keeps what its own actions left.
type PodStates interface {
	Get(uid types.UID) (*runtime.PodStatus, uint64, bool)
	Begin(uid types.UID) uint64
	Put(uid types.UID, st *runtime.PodStatus, gen uint64)
	Invalidate(uid types.UID)
	Forget(uid types.UID)
	Retain(keep func(types.UID) bool)
}

// StatusCache is the status manager's memory of each pod's status (statusmanager.Manager): the status
// last set, which the next one builds on.
type StatusCache interface {
	Status(uid types.UID) *corev1.PodStatus
	Keep(uid types.UID, s corev1.PodStatus)
}

// noStates keeps no state (no PLEG keeps it current): every sync reads the runtime.
type noStates struct{}

func (noStates) Get(types.UID) (*runtime.PodStatus, uint64, bool) { return nil, 0, false }
func (noStates) Begin(types.UID) uint64                           { return 0 }
func (noStates) Put(types.UID, *runtime.PodStatus, uint64)        {}
func (noStates) Invalidate(types.UID)                             {}
func (noStates) Forget(types.UID)                                 {}
func (noStates) Retain(func(types.UID) bool)                      {}

// noProbes runs no probes: every running container is started and ready, and none fails.
type noProbes struct{}

func (noProbes) Sync(*corev1.Pod, []string, []probes.ContainerInfo) {}
func (noProbes) RemovePod(types.UID)                                {}
func (noProbes) Ready(string) (bool, bool)                          { return true, true }
func (noProbes) Started(string) (bool, bool)                        { return true, true }
func (noProbes) LivenessFailed(string) (bool, string, *int64)       { return false, "", nil }

// noVolumes mounts nothing.
type noVolumes struct{}

func (noVolumes) SetUp(context.Context, *corev1.Pod) []error { return nil }
func (noVolumes) Devices(*corev1.Pod, *corev1.Container) ([]*runtimeapi.Device, error) {
	return nil, nil
}
func (noVolumes) Mounts(*corev1.Pod, *corev1.Container, map[string]string) ([]*runtimeapi.Mount, error) {
	return nil, nil
}
func (noVolumes) HostPath(_ *corev1.Pod, volume string) (string, error) {
	return "", fmt.Errorf("no volume %q is set up", volume)
}
func (noVolumes) Ready(types.UID) bool                      { return true }
func (noVolumes) TearDown(context.Context, types.UID) error { return nil }

// noDevices are no device plugins.
type noDevices struct{}

func (noDevices) RunContainerOptions(context.Context, *corev1.Pod, *corev1.Container) (*devices.RunOptions, error) {
	return nil, nil
}
func (noDevices) AllocatedResourcesStatus(types.UID, string) []corev1.ResourceStatus { return nil }

// noDynamicResources is a node without DRA: a pod with ResourceClaims cannot be prepared.
type noDynamicResources struct{}

func (noDynamicResources) PrepareResources(_ context.Context, pod *corev1.Pod) error {
	if dra.HasClaims(pod) {
		return errors.New("prepare dynamic resources: this node has no DRA manager")
	}
	return nil
}
func (noDynamicResources) CDIDevices(*corev1.Pod, *corev1.Container) ([]*runtimeapi.CDIDevice, error) {
	return nil, nil
}
func (noDynamicResources) UnprepareResources(context.Context, types.UID) error { return nil }
func (noDynamicResources) AllocatedResourcesStatus(*corev1.Pod, string) []corev1.ResourceStatus {
	return nil
}

// noUserNamespaces is a node without user namespaces: pods run in the node's, and a pod that sets
// hostUsers: false is refused when its sandbox is configured.
type noUserNamespaces struct{}

func (noUserNamespaces) PodUserNamespace(context.Context, *corev1.Pod, string) (*runtimeapi.UserNamespace, error) {
	return nil, nil
}
func (noUserNamespaces) Release(types.UID) {}

// noServices are no Services: containers get no service environment variables.
type noServices struct{}

func (noServices) HasSynced() bool                                        { return true }
func (noServices) ListServices(context.Context) ([]corev1.Service, error) { return nil, nil }

// noPodCgroups leaves the pod cgroups to the runtime.
type noPodCgroups struct{}

func (noPodCgroups) Ensure(string, podrules.PodCgroup) error { return nil }
func (noPodCgroups) UpdateQoS(int64) error                   { return nil }
func (noPodCgroups) Remove(types.UID) error                  { return nil }
func (noPodCgroups) List() []types.UID                       { return nil }
