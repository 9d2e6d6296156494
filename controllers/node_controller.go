package controllers

import (
	"context"
	"fmt"
	"net"
	goruntime "runtime"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/internal/periodic"
	"github.com/nodelet/nodelet/machine"
)

// nodeRuntime is what the Node reconciler asks of the container runtime.
type nodeRuntime interface {
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
}

// machineReader reads host facts.
type machineReader interface {
	Info() (machine.Info, error)
	Signals() (machine.Signals, error)
}

// PressureSource reports the node's pressure conditions (the eviction manager: MemoryPressure,
// DiskPressure, PIDPressure, held for the pressure transition period).
type PressureSource interface {
	NodeConditions() []corev1.NodeConditionType
}

// HealthCheck is a named check whose failure makes the node NotReady ("<name> is not healthy: <err>"),
// such as the PLEG's.
type HealthCheck struct {
	Name  string
	Check func() error
}

// VolumesInUse is the volume manager's side of status.volumesInUse (volumes.Manager).
type VolumesInUse interface {
	// VolumesInUse lists the attachable volumes the node's pods use or still have mounted.
	VolumesInUse() []corev1.UniqueVolumeName
	// MarkVolumesReportedInUse is told what a written status lists: those volumes may be mounted.
	MarkVolumesReportedInUse(names []corev1.UniqueVolumeName)
}

// DeviceCapacity is what the device plugins add to the Node (the device manager).
type DeviceCapacity interface {
	// Capacity counts every device of each resource, allocatable the healthy ones; deleted are the
	// resources whose plugin is gone for good.
	Capacity() (capacity, allocatable corev1.ResourceList, deleted []string)
}

// NodeReconciler registers the node and keeps its status true. It evaluates the node every
// UpdateFrequency and writes the status only when it changed or ReportFrequency has passed since the
// last write.
type NodeReconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Runtime  nodeRuntime
	Machine  machineReader
	Clock    clock.WithTicker
	// Startup, when set, times the node's startup (kubelet_node_startup_*).
	Startup *NodeStartup

	NodeName       string
	Hostname       string
	NodeIPs        []net.IP
	Labels         map[string]string // from --node-labels
	Taints         []corev1.Taint    // registerWithTaints
	ProviderID     string            // providerID (--provider-id): spec.providerID at registration
	Annotations    map[string]string
	MaxPods        int64
	MaxImages      int32
	Port           int32
	Reserved       corev1.ResourceList // systemReserved + kubeReserved
	HardEviction   []config.Threshold  // held back from allocatable
	KubeletVersion string
	// ReportUserNamespace sets status.nodeInfo.runningInUserNamespace (the KubeletInUserNamespace gate).
	ReportUserNamespace bool
	// DeclaredFeatures are the node's status.declaredFeatures: the features newer than the oldest API
	// server the node works with that it implements (the API server's NodeDeclaredFeatures admission lets
	// only such pods and updates through).
	DeclaredFeatures []string
	HealthChecks     []HealthCheck
	// NotReady are conditions that make the node NotReady in their own words (the node shutdown manager's
	// "node is shutting down").
	NotReady []func() error
	// Pressure reports the pressure conditions; nil reports none (a simulated node).
	Pressure PressureSource
	// Volumes gives status.volumesInUse; nil: none (a simulated node).
	Volumes VolumesInUse
	// Devices gives the device plugins' resources; nil: none.
	Devices DeviceCapacity

	// NoEphemeralStorage leaves ephemeral-storage out of capacity and allocatable
	// (localStorageCapacityIsolation: false, as the kubelet).
	NoEphemeralStorage bool

	UpdateFrequency time.Duration
	ReportFrequency time.Duration

	mu             sync.Mutex
	lastReport     time.Time
	lastConditions map[corev1.NodeConditionType]corev1.ConditionStatus
	ticks          chan event.GenericEvent
	// started: the Starting event was recorded; rebooted: the Rebooted one; unschedulable is the Node's
	// spec.unschedulable last seen (false at start, as the kubelet's).
	started, rebooted, unschedulable bool
}

// SetupWithManager registers the reconciler: it watches its own Node (deletions re-register it) and a
// ticker on the injected clock that asks for an evaluation every UpdateFrequency.
func (r *NodeReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.ticks = make(chan event.GenericEvent, 1)
	if err := mgr.Add(manager.RunnableFunc(r.tick)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("node").
		For(&corev1.Node{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return true },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		WatchesRawSource(source.Channel(r.ticks, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// Trigger asks for an evaluation now (the volume manager calls it when volumesInUse changes: a volume
// is mounted only once the status lists it). It never blocks.
func (r *NodeReconciler) Trigger() {
	if r.ticks == nil {
		return
	}
	select {
	case r.ticks <- event.GenericEvent{Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.NodeName}}}:
	default: // an evaluation is already queued
	}
}

// tick asks for an evaluation now and then every UpdateFrequency, until ctx ends.
func (r *NodeReconciler) tick(ctx context.Context) error {
	return periodic.Run(ctx, r.Clock, nil, r.UpdateFrequency, periodic.Measured(ctx, "node-status-trigger", func(context.Context) { r.Trigger() }))
}

// Reconcile registers the node if needed and brings its status up to date.
func (r *NodeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name != r.NodeName {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	r.recordStarting()
	obs, err := r.observe(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	node := &corev1.Node{}
	err = r.Client.Get(ctx, types.NamespacedName{Name: r.NodeName}, node)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.register(ctx, obs)
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("get node %s: %w", r.NodeName, err)
	}
	r.recordSchedulable(node.Spec.Unschedulable)
	if err := r.updateStatus(ctx, node, obs); err != nil {
		return ctrl.Result{}, err
	}
	log.V(2).Info("Node status evaluated")
	return ctrl.Result{}, nil
}

// initialNode is the Node object the agent registers.
func (r *NodeReconciler) initialNode() *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:      r.Hostname,
		corev1.LabelOSStable:      goruntime.GOOS,
		corev1.LabelArchStable:    goruntime.GOARCH,
		"beta.kubernetes.io/os":   goruntime.GOOS,
		"beta.kubernetes.io/arch": goruntime.GOARCH,
	}
	for k, v := range r.Labels {
		labels[k] = v
	}
	annotations := map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}
	for k, v := range r.Annotations {
		annotations[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: r.NodeName, Labels: labels, Annotations: annotations},
		Spec:       corev1.NodeSpec{Taints: append([]corev1.Taint(nil), r.Taints...), ProviderID: r.ProviderID},
	}
}

// register creates the Node with its first status. If it already exists (a restart, or a cache that has
// not caught up), the default labels are reconciled on the existing object instead.
func (r *NodeReconciler) register(ctx context.Context, obs observation) error {
	node := r.initialNode()
	now := metav1.NewTime(r.Clock.Now())
	node.Status = r.nodeStatus(corev1.NodeStatus{}, obs, r.pressure(), now)
	r.Startup.attempt()
	err := r.Client.Create(ctx, node)
	if apierrors.IsAlreadyExists(err) {
		// The evaluation this reconcile was asked for still happens: a trigger (volumesInUse) is not
		// lost to a cache that has yet to see the node.
		existing, err := r.reconcileLabels(ctx)
		if err != nil {
			return err
		}
		return r.updateStatus(ctx, existing, obs)
	}
	if err != nil {
		return fmt.Errorf("register node %s: %w", r.NodeName, err)
	}
	r.Startup.registered()
	ctrl.LoggerFrom(ctx).Info("Successfully registered node", "node", r.NodeName)
	r.mu.Lock()
	r.lastReport = now.Time
	r.mu.Unlock()
	r.recordTransitions(node.Status.Conditions)
	// The status sent with a Create is kept by the API server; write it again so that the heartbeat
	// and any field dropped on create are current.
	return r.updateStatus(ctx, node, obs)
}

// reconcileLabels restores the default labels on a node that already existed at registration and returns
// the node as it now is.
func (r *NodeReconciler) reconcileLabels(ctx context.Context) (*corev1.Node, error) {
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: r.NodeName}, node); err != nil {
		return nil, fmt.Errorf("get existing node %s: %w", r.NodeName, err)
	}
	want := r.initialNode().Labels
	patch := client.MergeFrom(node.DeepCopy())
	changed := false
	for k, v := range want {
		if node.Labels[k] != v {
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[k], changed = v, true
		}
	}
	if !changed {
		return node, nil
	}
	if err := r.Client.Patch(ctx, node, patch); err != nil {
		return nil, fmt.Errorf("reconcile labels of node %s: %w", r.NodeName, err)
	}
	return node, nil
}

// pressure is which pressure conditions are true now, as the eviction manager says.
func (r *NodeReconciler) pressure() map[corev1.NodeConditionType]bool {
	out := map[corev1.NodeConditionType]bool{}
	if r.Pressure == nil {
		return out
	}
	for _, c := range r.Pressure.NodeConditions() {
		out[c] = true
	}
	return out
}

// updateStatus writes the node's status when it changed or the report period has passed.
func (r *NodeReconciler) updateStatus(ctx context.Context, node *corev1.Node, obs observation) error {
	now := r.Clock.Now()
	desired := r.nodeStatus(node.Status, obs, r.pressure(), metav1.NewTime(now))
	r.mu.Lock()
	due := !now.Before(r.lastReport.Add(r.ReportFrequency))
	r.mu.Unlock()
	if !due && !statusChanged(node.Status, desired) {
		r.markVolumesReported(desired.VolumesInUse)
		return nil
	}
	updated := node.DeepCopy()
	updated.Status = desired
	if err := r.Client.Status().Patch(ctx, updated, client.StrategicMergeFrom(node)); err != nil {
		return fmt.Errorf("update status of node %s: %w", r.NodeName, err)
	}
	if old, now := node.Status.NodeInfo.BootID, desired.NodeInfo.BootID; old != "" && now != "" && old != now {
		r.recordRebooted(now)
	}
	r.markVolumesReported(desired.VolumesInUse)
	r.mu.Lock()
	r.lastReport = now
	r.mu.Unlock()
	r.recordTransitions(desired.Conditions)
	for _, c := range desired.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			r.Startup.ready()
		}
	}
	return nil
}

// markVolumesReported tells the volume manager which volumes the node's status now lists in use.
func (r *NodeReconciler) markVolumesReported(names []corev1.UniqueVolumeName) {
	if r.Volumes != nil {
		r.Volumes.MarkVolumesReportedInUse(names)
	}
}

// recordTransitions emits the kubelet's node events (NodeReady, NodeHasSufficientMemory, ...) when a
// condition's status differs from the one this agent last reported.
func (r *NodeReconciler) recordTransitions(conds []corev1.NodeCondition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastConditions == nil {
		r.lastConditions = map[corev1.NodeConditionType]corev1.ConditionStatus{}
	}
	ref := r.nodeRef()
	for _, c := range conds {
		prev, seen := r.lastConditions[c.Type]
		if seen && prev == c.Status {
			continue
		}
		r.lastConditions[c.Type] = c.Status
		if reason := conditionEvent(c); reason != "" && r.Recorder != nil {
			r.Recorder.Eventf(ref, corev1.EventTypeNormal, reason, "Node %s status is now: %s", r.NodeName, reason)
		}
	}
}

// nodeRef is the Node as the kubelet's events name it (its UID the node's name).
func (r *NodeReconciler) nodeRef() *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: r.NodeName, UID: types.UID(r.NodeName)}
}

// recordStarting records the kubelet's Starting event once per agent start.
func (r *NodeReconciler) recordStarting() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.Recorder == nil {
		return
	}
	r.started = true
	r.Recorder.Event(r.nodeRef(), corev1.EventTypeNormal, "Starting", "Starting kubelet.")
}

// recordRebooted records, once, that the machine booted again since the Node's status was last written
// (its boot ID changed).
func (r *NodeReconciler) recordRebooted(bootID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rebooted || r.Recorder == nil {
		return
	}
	r.rebooted = true
	r.Recorder.Eventf(r.nodeRef(), corev1.EventTypeWarning, "Rebooted", "Node %s has been rebooted, boot id: %s", r.NodeName, bootID)
}

// recordSchedulable records NodeSchedulable or NodeNotSchedulable when spec.unschedulable changed since
// last seen (a cordon or an uncordon).
func (r *NodeReconciler) recordSchedulable(unschedulable bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unschedulable == unschedulable {
		return
	}
	r.unschedulable = unschedulable
	reason := "NodeSchedulable"
	if unschedulable {
		reason = "NodeNotSchedulable"
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(r.nodeRef(), corev1.EventTypeNormal, reason, "Node %s status is now: %s", r.NodeName, reason)
	}
}

func conditionEvent(c corev1.NodeCondition) string {
	if c.Type == corev1.NodeReady {
		if c.Status == corev1.ConditionTrue {
			return "NodeReady"
		}
		return "NodeNotReady"
	}
	txt, ok := pressureTexts[c.Type]
	if !ok {
		return ""
	}
	if c.Status == corev1.ConditionTrue {
		return txt.trueEvent
	}
	return txt.falseEvent
}

func equalStatus(a, b *corev1.NodeStatus) bool { return equality.Semantic.DeepEqual(a, b) }
