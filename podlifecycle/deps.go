package podlifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nodelet/nodelet/allocation"
	"github.com/nodelet/nodelet/devices"
	"github.com/nodelet/nodelet/podsyncer"
	"github.com/nodelet/nodelet/runtime/pleg"
	"github.com/nodelet/nodelet/runtime/podconfig"
	"github.com/nodelet/nodelet/statusmanager"
	"github.com/nodelet/nodelet/timeline"
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
	// PodsSynced tells whether Client's pod cache has listed the node's pods once. Until it has, admission
	// and housekeeping do not wait on the cache (a read blocks until it syncs, and it cannot while the API
	// server is away, as when a control plane's static pods start): they go on with the pods the reconciler
	// knows, as the kubelet admits with its pod manager's. nil: reads of Client are bounded by a timeout only.
	PodsSynced func() bool
	// Secrets reads the Secrets, ConfigMaps and RuntimeClasses pods reference, by name (APIObjects).
	Secrets Objects
	// Node returns the node, for admission (allocatable, labels) and resourceFieldRef defaults.
	Node func(ctx context.Context) (*corev1.Node, error)

	// TracerProvider traces the pod syncs (syncPod, syncTerminatingPod, syncTerminatedPod spans, with the
	// CRI calls they make as children when the runtime client traces too) and each pod's start (nil: none).
	TracerProvider trace.TracerProvider

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
	// Devices gives pods the devices of the device plugin resources they ask for, at admission and to
	// their containers (nil: no device plugins).
	Devices Devices
	// UserNamespaces gives pods that set hostUsers: false a user namespace of their own (nil: none; such
	// pods fail to start with the kubelet's message).
	UserNamespaces UserNamespaces
	// DynamicResources prepares the pods' ResourceClaims with their DRA drivers (nil: no DRA; a pod with
	// claims does not start).
	DynamicResources DynamicResources
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
		client: deps.Client, podsSynced: deps.PodsSynced, recorder: deps.Recorder, clock: deps.Clock, node: deps.Node, pleg: deps.PLEG,
		static: deps.Static, admitters: deps.Admitters, devices: deps.Devices,
		nodeName: opts.NodeName, rootDir: opts.RootDir,
		staticKinds: opts.StaticKinds, maxWorkers: max(opts.Workers, 1),
		housekeepingPeriod: opts.HousekeepingPeriod, sysctls: opts.Sysctls,
		workers: map[types.UID]*podWorker{}, byKey: map[types.NamespacedName]map[types.UID]bool{},
		wake: make(chan event.GenericEvent, 1024), metrics: newPodMetrics(nil),
	}
	r.defaults()
	r.statuses = statusmanager.New(deps.Client)
	r.statuses.Clock = r.clock
	r.timeline = timeline.NewRecorder(r.clock)
	r.tracer = tracenoop.NewTracerProvider().Tracer(instrumentationScope)
	if deps.TracerProvider != nil {
		r.tracer = deps.TracerProvider.Tracer(instrumentationScope)
		r.timeline.Tracer = r.tracer
	}
	alloc, err := allocation.New(opts.RootDir)
	if err != nil {
		return nil, fmt.Errorf("podlifecycle.New: %w (drain the node and remove the file)", err)
	}
	r.alloc = alloc
	r.resizes = &resizer{alloc: alloc, recorder: deps.Recorder, clock: deps.Clock, node: r.node, host: opts.HostResources,
		admitted: r.admittedPods, syncing: r.syncingPod, enqueue: r.enqueue, metrics: r.metrics}
	var states podsyncer.PodStates
	if c := r.pleg.Cache(); c != nil {
		states = c
	}
	sdeps := podsyncer.Deps{
		Runtime: deps.Runtime, Recorder: deps.Recorder, Clock: deps.Clock, Secrets: deps.Secrets, Node: r.node,
		Probes: deps.Probes, Volumes: deps.Volumes, Services: deps.Services, PodCgroups: deps.PodCgroups,
		PullRecords: deps.PullRecords, States: states, Statuses: r.statuses, Enqueue: r.enqueue,
		AdmittedPods: r.admittedPods, Actuation: alloc, Devices: deps.Devices, Timeline: r.timeline,
	}
	if deps.UserNamespaces != nil {
		sdeps.UserNamespaces, r.userns = deps.UserNamespaces, deps.UserNamespaces
	}
	if deps.DynamicResources != nil {
		sdeps.DynamicResources, r.dra = deps.DynamicResources, deps.DynamicResources
	}
	sdeps = sdeps.WithDefaults()
	r.states, r.volumes, r.podCgroups = sdeps.States, sdeps.Volumes, sdeps.PodCgroups
	syncer, err := podsyncer.New(sdeps, podsyncer.Options{
		NodeName: opts.NodeName, RootDir: opts.RootDir, HostIPs: opts.HostIPs, Sandbox: opts.Sandbox,
		ImagePulls: opts.ImagePulls, ResyncPeriod: opts.ResyncPeriod, SeccompDefault: opts.SeccompDefault,
		HostResources: opts.HostResources,
	})
	if err != nil {
		return nil, err
	}
	r.syncer = syncer
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

// defaults puts a no-op in place of each optional dependency of the workers not given, and the defaults of
// settings (the syncer's are podsyncer.Deps.WithDefaults).
func (r *Reconciler) defaults() {
	if r.node == nil {
		r.node = func(context.Context) (*corev1.Node, error) { return nil, errStandalone }
	}
	if r.pleg == nil {
		r.pleg = noPLEG{}
	}
	if r.static == nil {
		r.static = noStaticPods{}
	}
	if r.sysctls == nil {
		r.sysctls = defaultSysctls
	}
	if r.housekeepingPeriod <= 0 {
		r.housekeepingPeriod = defaultHousekeepingPeriod
	}
	if r.devices == nil {
		r.devices = noDevices{}
	}
	if r.userns == nil {
		r.userns = noUserNamespaces{}
	}
	if r.dra == nil {
		r.dra = noDynamicResources{}
	}
}

// noDynamicResources is no DRA: no claim is ever prepared, so none is held.
type noDynamicResources struct{}

func (noDynamicResources) MightNeedToUnprepare(types.UID) bool { return false }
func (noDynamicResources) UnprepareOrphans(context.Context, func(types.UID) bool) error {
	return nil
}

// noUserNamespaces gives no pod a user namespace: there are none to release.
type noUserNamespaces struct{}

func (noUserNamespaces) RemoveOrphans(func(types.UID) bool) error { return nil }

// noDevices are no device plugins: no pod asks for their resources.
type noDevices struct{}

func (noDevices) Allocate(context.Context, *corev1.Pod, func(types.UID) bool) error { return nil }
func (noDevices) SanitizeAllocatable(_ *corev1.Pod, alloc corev1.ResourceList) corev1.ResourceList {
	return alloc
}
func (noDevices) RunContainerOptions(context.Context, *corev1.Pod, *corev1.Container) (*devices.RunOptions, error) {
	return nil, nil
}
func (noDevices) AllocatedResourcesStatus(types.UID, string) []corev1.ResourceStatus { return nil }

// errStandalone is what a standalone reconciler's Node returns.
var errStandalone = errors.New("standalone: no API server")

// The dependencies the pod syncer works with (podsyncer), given to New.
type (
	// Runtime is the container runtime (runtime.Client).
	Runtime = podsyncer.Runtime
	// ImageService is what the image puller asks of the runtime.
	ImageService = podsyncer.ImageService
	// EventRecorder is the part of client-go's record.EventRecorder the pods' events go through.
	EventRecorder = podsyncer.EventRecorder
	// Objects fetches the Secrets, ConfigMaps and RuntimeClasses a pod references, by name.
	Objects = podsyncer.Objects
	// Prober runs the containers' probes (probes.Manager).
	Prober = podsyncer.Prober
	// Volumes prepares and tears down pods' volumes (volumes.Manager).
	Volumes = podsyncer.Volumes
	// ServiceLister is the cluster's Services (APIServices), for service environment variables.
	ServiceLister = podsyncer.ServiceLister
	// PodCgroups makes and removes pod cgroups (podcgroups.Manager).
	PodCgroups = podsyncer.PodCgroups
	// PullRecorder checks images on the node against pull credentials (imagepull.Manager).
	PullRecorder = podsyncer.PullRecorder
)

// UserNamespaces is what the reconciler asks of the user namespace manager (userns.Manager): the pods'
// user namespaces, released once a pod terminated, and by housekeeping for pods the node no longer has.
type UserNamespaces interface {
	podsyncer.UserNamespaces
	RemoveOrphans(active func(types.UID) bool) error
}

// DynamicResources is what the reconciler asks of the DRA manager (dra.Manager): the syncer's part, whether
// a pod still holds prepared claims (its API object stays until they are released), and the release of
// the claims of pods the node no longer has.
type DynamicResources interface {
	podsyncer.DynamicResources
	claimsHolder
}

// claimsHolder is the reconciler's own part of DynamicResources.
type claimsHolder interface {
	MightNeedToUnprepare(uid types.UID) bool
	UnprepareOrphans(ctx context.Context, active func(types.UID) bool) error
}

// RelistedPods is what the reconciler asks of the PLEG (pleg.PLEG): the pods the runtime holds, its
// events, and the pods' runtime state it keeps current (nil: every sync reads the runtime).
type RelistedPods interface {
	Pods() []pleg.RelistedPod
	PodRefs() []pleg.PodRef
	PodUIDs(namespace, name string) []types.UID
	Source() source.Source
	Cache() *pleg.PodCache
}

// StaticPods is what the reconciler asks of the static pod store (staticpods.Store).
type StaticPods interface {
	Get(key types.NamespacedName) (*corev1.Pod, bool)
	List() []*corev1.Pod
	Source() source.Source
	SeenSources(kinds ...string) bool
}

// noPLEG relists nothing.
type noPLEG struct{}

func (noPLEG) Pods() []pleg.RelistedPod           { return nil }
func (noPLEG) PodRefs() []pleg.PodRef             { return nil }
func (noPLEG) PodUIDs(string, string) []types.UID { return nil }
func (noPLEG) Source() source.Source              { return noSource }
func (noPLEG) Cache() *pleg.PodCache              { return nil }

// noStaticPods holds no static pods and has no sources to wait for.
type noStaticPods struct{}

func (noStaticPods) Get(types.NamespacedName) (*corev1.Pod, bool) { return nil, false }
func (noStaticPods) List() []*corev1.Pod                          { return nil }
func (noStaticPods) Source() source.Source                        { return noSource }
func (noStaticPods) SeenSources(...string) bool                   { return true }

// noSource enqueues nothing.
var noSource = source.Func(func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request]) error { return nil })
