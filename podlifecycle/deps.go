package podlifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nodelet/nodelet/imagepull"
	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/probes"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/pleg"
	"github.com/nodelet/nodelet/runtime/podconfig"
	"github.com/nodelet/nodelet/statusmanager"
)

// Deps are what the Reconciler works with. Runtime, Recorder and Clock are required. Client, Secrets
// and Node reach the API server: required, unless Options.Standalone says there is none, when they must
// be nil. Every other dependency is optional: nil turns its feature off, and New puts a no-op in its
// place, so the reconciler never checks for nil.
type Deps struct {
	// Runtime is the container runtime (runtime.Client).
	Runtime Runtime
	// Recorder records the pods' events.
	Recorder EventRecorder
	// Clock is the reconciler's time: back-offs, grace periods, deadlines, resyncs and housekeeping.
	Clock clock.WithTicker

	// Client reads the pods bound to the node (its node-scoped cache), patches their status and deletes
	// them once terminated.
	Client client.Client
	// Secrets reads the Secrets, ConfigMaps and RuntimeClasses pods reference, by name (APIObjects).
	Secrets Objects
	// Node returns the node, for admission (allocatable, labels) and resourceFieldRef defaults.
	Node func(ctx context.Context) (*corev1.Node, error)

	// PLEG is the runtime's pods and their events (nil: no relist, and the runtime's orphans are found
	// only under names the reconciler is asked about).
	PLEG RelistedPods
	// Probes runs the containers' probes (nil: none; every running container is started and ready).
	Probes Prober
	// Volumes prepares and tears down pods' volumes (nil: pods get no volume mounts).
	Volumes Volumes
	// Services are the cluster's Services, for service environment variables (nil: none).
	Services ServiceLister
	// Static holds the static pods (nil: none); Options.StaticKinds are its configured sources.
	Static StaticPods
	// Admitters admit pods before the reconciler's own admission, in order (the eviction manager: no
	// BestEffort pod under memory pressure, only critical pods under disk or PID pressure).
	Admitters []PodAdmitter
	// PodCgroups makes a pod's cgroup with podPidsLimit before its sandbox runs and removes it with the
	// pod (nil: the runtime alone makes pod cgroups).
	PodCgroups PodCgroups
	// PullRecords checks images already on the node against a pod's pull credentials and records pulls
	// (imagePullCredentialsVerificationPolicy; nil: KubeletEnsureSecretPulledImages is off, and an image on
	// the node is used by any pod).
	PullRecords PullRecorder
}

// Options are the Reconciler's settings. NodeName and RootDir are required; the others have defaults.
type Options struct {
	// NodeName is the node's name: only pods bound to it run.
	NodeName string
	// RootDir is the agent's root directory (pods' directories are <root>/pods/<uid>).
	RootDir string
	// Standalone runs without an API server: static pods only, no status writes, no Secrets, ConfigMaps
	// or RuntimeClasses (Deps.Client, Secrets and Node are nil).
	Standalone bool
	// HostIPs are the node's IPs (status.hostIPs, and the pod IPs of host-network pods).
	HostIPs []string
	// Sandbox configures pod sandboxes: DNS, log directory, cgroups.
	Sandbox podconfig.SandboxOptions
	// StaticKinds are the configured static pod sources ("file", "http"): until each was read once, no
	// pod is stopped for being missing from Deps.Static.
	StaticKinds []string
	// Workers bounds the pods synced at once (MaxConcurrentReconciles; default 1).
	Workers int
	// ImagePulls bounds the image pulls running at once (default 1).
	ImagePulls int
	// ResyncPeriod is how often a pod is synced without a trigger (the kubelet's syncFrequency; default
	// 1 min).
	ResyncPeriod time.Duration
	// Sysctls are the sysctls pods may set (nil: the safe sysctls of any kernel).
	Sysctls *SysctlAllowlist
	// SeccompDefault is seccompDefault: containers that name no seccomp profile run RuntimeDefault.
	SeccompDefault bool
	// HostResources are the node's settings and host facts every container's CRI resources follow: huge page
	// sizes, cgroup v2 OOM group kill, swap.
	HostResources podconfig.HostResources
	// HousekeepingPeriod is how often orphans are looked for (default 2 s, the kubelet's); hollow nodes
	// look less often.
	HousekeepingPeriod time.Duration
}

// New builds the pod reconciler. It fails, naming them, when required dependencies or settings are
// missing, or when API access is given to a standalone reconciler. Call RegisterMetrics, if at all,
// before Run.
func New(deps Deps, opts Options) (*Reconciler, error) {
	if err := validate(deps, opts); err != nil {
		return nil, err
	}
	r := &Reconciler{
		client: deps.Client, cri: deps.Runtime, recorder: deps.Recorder, clock: deps.Clock, secrets: deps.Secrets,
		node: deps.Node, pleg: deps.PLEG, probes: deps.Probes, volumes: deps.Volumes, services: deps.Services,
		static: deps.Static, podCgroups: deps.PodCgroups, admitters: deps.Admitters,
		nodeName: opts.NodeName, rootDir: opts.RootDir, hostIPs: opts.HostIPs, sandboxOpts: opts.Sandbox,
		staticKinds: opts.StaticKinds, maxWorkers: max(opts.Workers, 1), resyncPeriod: opts.ResyncPeriod,
		housekeepingPeriod: opts.HousekeepingPeriod,
		sysctls:            opts.Sysctls, seccompDefault: opts.SeccompDefault, hostResources: opts.HostResources,
		workers: map[types.UID]*podWorker{}, byKey: map[types.NamespacedName]map[types.UID]bool{},
		wake: make(chan event.GenericEvent, 1024), metrics: newPodMetrics(nil),
	}
	r.defaults()
	r.statuses = statusmanager.New(deps.Client)
	r.states = noStates{}
	if c := r.pleg.Cache(); c != nil {
		r.states = c
	}
	r.puller = newImagePuller(r.cri, r.clock, opts.ImagePulls, r.recorder, deps.PullRecords, r.enqueueKey)
	r.crash = newBackoff(r.clock, backoffInitial, backoffMax)
	r.sandboxBackoff = newBackoff(r.clock, sandboxRetryInitial, sandboxRetryMax)
	return r, nil
}

// validate names what New lacks.
func validate(deps Deps, opts Options) error {
	var missing []string
	required := []struct {
		name  string
		unset bool
	}{
		{"Deps.Runtime", deps.Runtime == nil}, {"Deps.Recorder", deps.Recorder == nil}, {"Deps.Clock", deps.Clock == nil},
		{"Options.NodeName", opts.NodeName == ""}, {"Options.RootDir", opts.RootDir == ""},
	}
	if !opts.Standalone {
		required = append(required, []struct {
			name  string
			unset bool
		}{{"Deps.Client", deps.Client == nil}, {"Deps.Secrets", deps.Secrets == nil}, {"Deps.Node", deps.Node == nil}}...)
	}
	for _, f := range required {
		if f.unset {
			missing = append(missing, f.name)
		}
	}
	var errs []error
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("missing %v", missing))
	}
	if opts.Standalone && (deps.Client != nil || deps.Secrets != nil || deps.Node != nil) {
		errs = append(errs, errors.New("standalone: Deps.Client, Secrets and Node must be nil"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("podlifecycle.New: %w", err)
	}
	return nil
}

// defaults puts a no-op in place of each optional dependency not given, and the defaults of settings.
func (r *Reconciler) defaults() {
	if r.node == nil {
		r.node = func(context.Context) (*corev1.Node, error) { return nil, errStandalone }
	}
	if r.pleg == nil {
		r.pleg = noPLEG{}
	}
	if r.probes == nil {
		r.probes = noProbes{}
	}
	if r.volumes == nil {
		r.volumes = noVolumes{}
	}
	if r.services == nil {
		r.services = noServices{}
	}
	if r.static == nil {
		r.static = noStaticPods{}
	}
	if r.podCgroups == nil {
		r.podCgroups = noPodCgroups{}
	}
	if r.sysctls == nil {
		r.sysctls = defaultSysctls
	}
	if r.resyncPeriod <= 0 {
		r.resyncPeriod = time.Minute
	}
	if r.housekeepingPeriod <= 0 {
		r.housekeepingPeriod = defaultHousekeepingPeriod
	}
}

// errStandalone is what a standalone reconciler's Node returns.
var errStandalone = errors.New("standalone: no API server")

// Runtime is what the reconciler asks of the container runtime (runtime.Client).
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
	RemoveContainer(ctx context.Context, id string) error
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error)
}

// ImageService is what the image puller asks of the runtime.
type ImageService interface {
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error)
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error)
}

// EventRecorder is the part of client-go's record.EventRecorder the reconciler uses.
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

// RelistedPods is what the reconciler asks of the PLEG (pleg.PLEG): the pods the runtime holds, its
// events, and the pods' runtime state it keeps current (nil: every sync reads the runtime).
type RelistedPods interface {
	Pods() []pleg.RelistedPod
	Source() source.Source
	Cache() *pleg.PodCache
}

// Prober is what the reconciler asks of the probes (probes.Manager).
type Prober interface {
	probeResults
	Sync(pod *corev1.Pod, podIPs []string, containers []probes.ContainerInfo)
	RemovePod(uid types.UID)
	Ready(containerID string) (ready, known bool)
}

// Volumes is what the reconciler asks of the volume manager (volumes.Manager).
type Volumes interface {
	SetUp(ctx context.Context, pod *corev1.Pod) []error
	Mounts(pod *corev1.Pod, c *corev1.Container, env map[string]string) ([]*runtimeapi.Mount, error)
	Devices(pod *corev1.Pod, c *corev1.Container) ([]*runtimeapi.Device, error)
	Ready(uid types.UID) bool
	TearDown(ctx context.Context, uid types.UID) error
}

// ServiceLister is what the reconciler asks of the cluster's Services (APIServices), for service
// environment variables.
type ServiceLister interface {
	// HasSynced tells whether the Services have been listed at least once.
	HasSynced() bool
	ListServices(ctx context.Context) ([]corev1.Service, error)
}

// StaticPods is what the reconciler asks of the static pod store (staticpods.Store).
type StaticPods interface {
	Get(key types.NamespacedName) (*corev1.Pod, bool)
	List() []*corev1.Pod
	Source() source.Source
	SeenSources(kinds ...string) bool
}

// PodCgroups is what the reconciler asks of the pod cgroups (podcgroups.Manager).
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

// noPLEG relists nothing.
type noPLEG struct{}

func (noPLEG) Pods() []pleg.RelistedPod { return nil }
func (noPLEG) Source() source.Source    { return noSource }
func (noPLEG) Cache() *pleg.PodCache    { return nil }

// podStates is the pods' runtime state the PLEG keeps current (pleg.PodCache): a sync starts from a
// pod's state while it is current, and keeps what its own actions left.
type podStates interface {
	Get(uid types.UID) (*runtime.PodStatus, uint64, bool)
	Begin(uid types.UID) uint64
	Put(uid types.UID, st *runtime.PodStatus, gen uint64)
	Invalidate(uid types.UID)
	Forget(uid types.UID)
	Retain(keep func(types.UID) bool)
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
func (noVolumes) Ready(types.UID) bool                      { return true }
func (noVolumes) TearDown(context.Context, types.UID) error { return nil }

// noServices are no Services: containers get no service environment variables.
type noServices struct{}

func (noServices) HasSynced() bool                                        { return true }
func (noServices) ListServices(context.Context) ([]corev1.Service, error) { return nil, nil }

// noStaticPods holds no static pods and has no sources to wait for.
type noStaticPods struct{}

func (noStaticPods) Get(types.NamespacedName) (*corev1.Pod, bool) { return nil, false }
func (noStaticPods) List() []*corev1.Pod                          { return nil }
func (noStaticPods) Source() source.Source                        { return noSource }
func (noStaticPods) SeenSources(...string) bool                   { return true }

// noPodCgroups leaves the pod cgroups to the runtime.
type noPodCgroups struct{}

func (noPodCgroups) Ensure(string, podrules.PodCgroup) error { return nil }
func (noPodCgroups) UpdateQoS(int64) error                   { return nil }
func (noPodCgroups) Remove(types.UID) error                  { return nil }
func (noPodCgroups) List() []types.UID                       { return nil }

// noSource enqueues nothing.
var noSource = source.Func(func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request]) error { return nil })
