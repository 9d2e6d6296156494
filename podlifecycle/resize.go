package podlifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/allocation"
	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podsyncer"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// The kubelet's resize events.
const (
	eventResizeStarted    = "ResizeStarted"
	eventResizeDeferred   = "ResizeDeferred"
	eventResizeInfeasible = "ResizeInfeasible"
	eventResizeCompleted  = "ResizeCompleted"
	eventResizeError      = "ResizeError"
)

// msgSwapResize is the kubelet's Infeasible message for a memory resize of a container that may swap.
const msgSwapResize = "In-place resize of containers with swap is not supported."

// pendingResizeRetry is how often deferred resizes are tried again without a trigger (the kubelet's
// retry period).
const pendingResizeRetry = 3 * time.Minute

// resizer decides the in-place resizes of admitted pods (the kubelet's allocation manager's decisions):
// one at a time (mu), so two resizes never both take the same room; retryDue asks housekeeping to retry
// deferred resizes (a pod left, finished or shrank), which it also does every pendingResizeRetry.
type resizer struct {
	alloc    *allocation.Manager
	recorder EventRecorder
	clock    clock.Clock
	node     func(ctx context.Context) (*corev1.Node, error)
	host     podconfig.HostResources
	// admitted are the admitted pods but except, as allocated; syncing looks up a syncing pod by UID.
	admitted func(except types.UID) []*corev1.Pod
	syncing  func(uid types.UID) *corev1.Pod
	enqueue  func(types.NamespacedName)
	metrics  *podMetrics

	mu        sync.Mutex
	retryDue  atomic.Bool
	lastRetry time.Time // housekeeping's goroutine only
}

// allocatedPod is the pod a syncing worker works with: the pod as admitted, with a resize its spec asks for
// decided first. A resize not decided at this generation is decided now: accepted (the allocation takes the
// spec, PodResizeInProgress is set) when the node has room for it next to the other admitted pods;
// otherwise PodResizePending says why — Infeasible (never, until the spec changes) or Deferred (retried as
// pods leave the node).
func (r *resizer) allocatedPod(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	if !r.alloc.HasAllocation(pod.UID) {
		if err := r.alloc.Allocate(pod); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to record the pod's allocated resources")
		}
		return pod
	}
	if !r.alloc.ResizeRequested(pod) {
		r.alloc.ClearPending(pod.UID)
		return pod
	}
	if p := r.alloc.Pending(pod.UID); p == nil || p.ObservedGeneration != pod.Generation {
		allocated, _ := r.alloc.PodWithAllocation(pod)
		r.countRequested(allocated, pod)
		r.decide(ctx, pod)
	}
	allocated, _ := r.alloc.PodWithAllocation(pod)
	return allocated
}

// decideResize decides one requested resize (the kubelet's handlePodResourcesResize). Decisions are made one
// at a time, so two resizes never both take the same room.
func (r *resizer) decide(ctx context.Context, pod *corev1.Pod) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	allocated, changed := r.alloc.PodWithAllocation(pod)
	if !changed {
		r.alloc.ClearPending(pod.UID)
		return false
	}
	reason, message := r.infeasible(pod, allocated), ""
	if reason != "" {
		r.metrics.infeasibleResizes.WithLabelValues("swap_limitation").Inc()
		reason, message = allocation.ReasonInfeasible, reason
	} else {
		node, err := r.node(ctx)
		if err != nil {
			node = nil
		}
		res := admitResources(pod, node, r.admitted(pod.UID))
		if res.admit {
			if err := r.alloc.Allocate(pod); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Failed to record the pod's allocated resources")
				return false
			}
			r.alloc.ClearPending(pod.UID)
			r.alloc.StartInProgress(pod.UID, pod.Generation, now)
			r.retryDue.Store(true) // a pod that shrank made room for others
			r.recorder.Event(podsyncer.PodRef(pod), corev1.EventTypeNormal, eventResizeStarted,
				resizeMessage("Pod resize started", pod, pod.Generation, ""))
			return true
		}
		reason, message = res.reason, res.message
	}
	if r.alloc.SetPending(pod.UID, reason, message, pod.Generation, now) {
		event := eventResizeDeferred
		if reason == allocation.ReasonInfeasible {
			event = eventResizeInfeasible
		}
		r.recorder.Event(podsyncer.PodRef(pod), corev1.EventTypeWarning, event,
			resizeMessage("Pod resize "+reason, pod, pod.Generation, message))
	}
	return false
}

// resizeInfeasible is why the node can never apply the resize in place, "" when it can: a memory change
// of a container that may swap (LimitedSwap), as the kubelet's resize admission refuses.
func (r *resizer) infeasible(desired, allocated *corev1.Pod) string {
	hr := r.host
	if hr.SwapBehavior != podrules.LimitedSwap || !hr.SwapController || hr.NodeSwap <= 0 {
		return ""
	}
	for _, pair := range containerPairs(desired, allocated) {
		d, a := pair[0], pair[1]
		if d.Resources.Requests.Memory().Cmp(*a.Resources.Requests.Memory()) == 0 || podrules.ResizeRestarts(d, corev1.ResourceMemory) {
			continue
		}
		if podrules.LimitedSwapEligible(desired, d, podrules.GetPodQOS(desired), hr.CgroupV2) ||
			podrules.LimitedSwapEligible(allocated, a, podrules.GetPodQOS(allocated), hr.CgroupV2) {
			return msgSwapResize
		}
	}
	return ""
}

// countRequested counts a resize asked for, per container resource and requirement that changes, as the
// kubelet's kubelet_container_requested_resizes_total.
func (r *resizer) countRequested(allocated, desired *corev1.Pod) {
	for _, pair := range containerPairs(desired, allocated) {
		d, a := pair[0].Resources, pair[1].Resources
		for _, c := range []struct {
			resource, requirement string
			desired, allocated    *resource.Quantity
		}{
			{"memory", "requests", d.Requests.Memory(), a.Requests.Memory()},
			{"memory", "limits", d.Limits.Memory(), a.Limits.Memory()},
			{"cpu", "requests", d.Requests.Cpu(), a.Requests.Cpu()},
			{"cpu", "limits", d.Limits.Cpu(), a.Limits.Cpu()},
		} {
			if op := resizeOperation(c.desired, c.allocated); op != "" {
				r.metrics.requestedResizes.WithLabelValues(c.resource, c.requirement, op).Inc()
			}
		}
	}
}

// resizeOperation is the kubelet's resizeOperationForResources: add, remove, increase, decrease or "".
func resizeOperation(desired, allocated *resource.Quantity) string {
	switch {
	case desired.IsZero() && !allocated.IsZero():
		return "remove"
	case allocated.IsZero() && !desired.IsZero():
		return "add"
	case desired.Cmp(*allocated) < 0:
		return "decrease"
	case desired.Cmp(*allocated) > 0:
		return "increase"
	}
	return ""
}

// containerPairs pairs each init and regular container of desired with the same container of allocated.
func containerPairs(desired, allocated *corev1.Pod) [][2]*corev1.Container {
	var out [][2]*corev1.Container
	for _, cs := range [][2][]corev1.Container{
		{desired.Spec.InitContainers, allocated.Spec.InitContainers}, {desired.Spec.Containers, allocated.Spec.Containers},
	} {
		for i := range cs[0] {
			if i < len(cs[1]) {
				out = append(out, [2]*corev1.Container{&cs[0][i], &cs[1][i]})
			}
		}
	}
	return out
}

// retryPending decides the deferred resizes again, in the kubelet's order, when room may have been
// made (a pod left or finished, a resize shrank a pod) or the retry period passed; the pods whose resize
// was accepted are synced.
func (r *resizer) retryPending(ctx context.Context) {
	if !r.retryDue.Swap(false) && r.clock.Since(r.lastRetry) < pendingResizeRetry {
		return
	}
	r.lastRetry = r.clock.Now()
	for _, pod := range r.alloc.PendingResizes(r.syncing) {
		if r.decide(ctx, pod) {
			r.enqueue(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		}
	}
}

// reportResize keeps PodResizeInProgress true to what a sync found: an error applying the resize (reason
// Error, a ResizeError event when new), still in progress, or done (the condition goes, with a
// ResizeCompleted event).
func (r *resizer) report(ctx context.Context, pod *corev1.Pod, rep *podsyncer.ResizeReport) {
	if rep == nil {
		return
	}
	now := r.clock.Now()
	switch {
	case rep.Err != nil:
		if r.alloc.InProgressError(pod.UID, rep.Err.Error(), pod.Generation, now) {
			r.recorder.Event(podsyncer.PodRef(pod), corev1.EventTypeWarning, eventResizeError,
				resizeMessage("Pod resize error", pod, pod.Generation, rep.Err.Error()))
		}
		ctrl.LoggerFrom(ctx).Error(rep.Err, "Failed to resize the pod in place")
	case rep.InProgress:
		r.alloc.KeepInProgress(pod.UID, pod.Generation, now)
	default:
		if gen, was := r.alloc.ClearInProgress(pod.UID); was {
			r.recorder.Event(podsyncer.PodRef(pod), corev1.EventTypeNormal, eventResizeCompleted,
				resizeMessage("Pod resize completed", pod, gen, ""))
		}
	}
}

// resizeSummary is the kubelet's resize event payload: the containers' resources, the generation and the
// error, as JSON.
type resizeSummary struct {
	InitContainers []containerResources `json:"initContainers,omitempty"`
	Containers     []containerResources `json:"containers,omitempty"`
	Generation     int64                `json:"generation"`
	Error          string               `json:"error,omitempty"`
}

type containerResources struct {
	Name      string                      `json:"name"`
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// resizeMessage is a resize event's message: the prefix, then the pod's resources as JSON.
func resizeMessage(prefix string, pod *corev1.Pod, generation int64, errMsg string) string {
	s := resizeSummary{Generation: generation, Error: errMsg}
	for _, c := range pod.Spec.InitContainers {
		s.InitContainers = append(s.InitContainers, containerResources{Name: c.Name, Resources: c.Resources})
	}
	for _, c := range pod.Spec.Containers {
		s.Containers = append(s.Containers, containerResources{Name: c.Name, Resources: c.Resources})
	}
	b, err := json.Marshal(s)
	if err != nil {
		return prefix
	}
	return fmt.Sprintf("%s: %s", prefix, b)
}
