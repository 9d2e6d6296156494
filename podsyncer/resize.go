package podsyncer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/allocation"
	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// Actuation is the record of the resources applied to each pod's containers (allocation.Manager): what
// an in-place resize is measured against, and what it updates.
type Actuation interface {
	Actuated(uid types.UID, container string) (corev1.ResourceRequirements, bool)
	SetActuated(pod *corev1.Pod, c *corev1.Container) error
	ActuatedPodLevel(uid types.UID) (*corev1.ResourceRequirements, bool)
	SetActuatedPodLevel(pod *corev1.Pod) error
}

// ResizeReport is where a pod's in-place resize stands after a sync.
type ResizeReport struct {
	// InProgress: a running container of the pod (regular or sidecar) has other resources than allocated.
	InProgress bool
	// Err is why applying the resize failed (the PodResizeInProgress condition's Error message).
	Err error
}

// resizer applies in-place resizes to a pod's running containers and its pod cgroup, and keeps the record
// of what each container was given (actuation).
type resizer struct {
	cri       Runtime
	actuation Actuation
	config    *configBuilder
	cgroups   *cgroupKeeper
	changed   func(uid types.UID)
	keep      func(uid types.UID, st *runtime.PodStatus, gen uint64)
	clock     clock.PassiveClock
	// duration is kubelet_pod_resize_duration_milliseconds (by success).
	duration atomic.Pointer[prometheus.HistogramVec]
}

// resizePhase applies an in-place resize to the running containers of the pod's ready sandbox and to its
// pod cgroup (pod-level resources included), the pod cgroup raised first, and reads the containers back into
// sc.Runtime (the runtime reports the resources they now run with); the pod cgroup is lowered to the pod's
// values once no container is being resized or restarted, and its pod-level resources are then recorded as
// actuated. A memory limit decrease below what a container or the pod uses is refused before anything is
// applied.
func (s *resizer) phase(ctx context.Context, sc *Scope, restarting bool, updates []resizeUpdate) (err error) {
	sb := sc.Runtime.ReadySandbox()
	if sb == nil {
		return nil
	}
	ps, pod := sc.State, sc.Pod
	podLevel := podLevelResizePending(pod, s.actuation)
	defer s.timeResize(len(updates) > 0 || podLevel)(&err)
	if len(updates) > 0 || restarting || podLevel {
		if err := s.checkMemoryDecrease(ctx, sb.Id, ps, pod, updates); err != nil {
			return err
		}
	}
	resizing := restarting || len(updates) > 0 || ps.Stopping()
	if err := s.cgroups.syncPodCgroup(ps, pod, s.actuatedPod(pod), resizing); err != nil {
		return err
	}
	final := !resizing
	if len(updates) > 0 {
		if err = s.updateAndRead(ctx, sc, sb.Id, updates); err != nil || restarting {
			return err
		}
		err = s.cgroups.syncPodCgroup(ps, pod, pod, false)
		final = err == nil
	}
	if final && podLevel {
		err = errors.Join(err, s.actuation.SetActuatedPodLevel(pod))
	}
	return err
}

// timeResize starts timing a resize being applied (active); the function it returns observes its
// duration and outcome (kubelet_pod_resize_duration_milliseconds).
func (s *resizer) timeResize(active bool) func(err *error) {
	if !active {
		return func(*error) {}
	}
	start := s.clock.Now()
	return func(err *error) {
		s.duration.Load().WithLabelValues(strconv.FormatBool(*err == nil)).Observe(float64(s.clock.Since(start).Milliseconds()))
	}
}

// updateAndRead updates the running containers in place and reads them back into sc.Runtime.
func (s *resizer) updateAndRead(ctx context.Context, sc *Scope, sandboxID string, updates []resizeUpdate) error {
	pod := sc.Pod
	err := s.updateContainers(ctx, pod, updates)
	for _, u := range updates {
		c, rerr := s.cri.ReadContainer(ctx, u.id, sandboxID)
		if rerr != nil {
			s.changed(pod.UID)
			return errors.Join(err, rerr)
		}
		sc.Runtime = sc.Runtime.WithContainer(c)
	}
	s.keep(pod.UID, sc.Runtime, sc.Gen)
	return err
}

// podLevelResizePending: the (allocated) pod's pod-level cpu or memory differ from those last applied to its
// cgroup, or none were recorded (written again once, as the kubelet does).
func podLevelResizePending(pod *corev1.Pod, act Actuation) bool {
	if pod.Spec.Resources == nil {
		return false
	}
	actuated, ok := act.ActuatedPodLevel(pod.UID)
	return !ok || len(changedResources(*actuated, *pod.Spec.Resources)) > 0
}

// podLevelResizeInProgress: the pod-level cpu or memory recorded as applied differ from the allocated
// ones (the kubelet's isPodLevelResourcesResizeInProgress: no record is no resize).
func podLevelResizeInProgress(pod *corev1.Pod, act Actuation) bool {
	if pod.Spec.Resources == nil {
		return false
	}
	actuated, ok := act.ActuatedPodLevel(pod.UID)
	return ok && len(changedResources(*actuated, *pod.Spec.Resources)) > 0
}

// resizeUpdate is a running container whose cpu or memory is to change in place.
type resizeUpdate struct {
	container *corev1.Container
	id        string
	current   corev1.ResourceRequirements // as actuated
	desired   corev1.ResourceRequirements // as allocated (effective limits)
}

// resizedResources are the resources of a container a resize looks at, in the order the kubelet applies
// them.
var resizedResources = []corev1.ResourceName{corev1.ResourceMemory, corev1.ResourceCPU}

// resizeActions compares each running resizable container of the (allocated) pod with what was applied to
// it: a change of a resource whose resizePolicy is RestartContainer restarts the container (a kill; its
// restart policy brings it back with the new resources), any other change is an in-place update.
// Containers already being killed are left alone.
func resizeActions(pod *corev1.Pod, st *runtime.PodStatus, act Actuation, killing []killAction) (kills []killAction, updates []resizeUpdate) {
	for _, rc := range runningResizable(pod, st) {
		if isKilled(killing, rc.status.ID) {
			continue
		}
		desired := allocation.EffectiveResources(pod, rc.container)
		current, _ := act.Actuated(pod.UID, rc.container.Name)
		changed := changedResources(current, desired)
		if len(changed) == 0 {
			continue
		}
		if rc.kind != runtime.KindInit && needsRestart(rc.container, changed) {
			kills = append(kills, killAction{container: rc.status, message: "Container " + rc.container.Name + " resize requires restart"})
			continue
		}
		updates = append(updates, resizeUpdate{container: rc.container, id: rc.status.ID, current: current, desired: desired})
	}
	return kills, updates
}

type runningContainer struct {
	container *corev1.Container
	kind      runtime.ContainerKind
	status    *runtime.ContainerStatus
}

// runningResizable are the pod's running containers a resize applies to: init containers (sidecars and
// the others) and regular containers, by their newest attempt.
func runningResizable(pod *corev1.Pod, st *runtime.PodStatus) []runningContainer {
	var out []runningContainer
	add := func(c *corev1.Container, kind runtime.ContainerKind) {
		if last := st.FindContainer(c.Name); last != nil && last.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			out = append(out, runningContainer{container: c, kind: kind, status: last})
		}
	}
	for i := range pod.Spec.InitContainers {
		kind := runtime.KindInit
		if podrules.IsSidecar(&pod.Spec.InitContainers[i]) {
			kind = runtime.KindSidecar
		}
		add(&pod.Spec.InitContainers[i], kind)
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i], runtime.KindRegular)
	}
	return out
}

func isKilled(kills []killAction, id string) bool {
	for _, k := range kills {
		if k.container.ID == id {
			return true
		}
	}
	return false
}

// changedResources are the resources (cpu, memory) whose request or limit differ between two records.
func changedResources(current, desired corev1.ResourceRequirements) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, name := range resizedResources {
		if !sameQuantity(current.Requests, desired.Requests, name) || !sameQuantity(current.Limits, desired.Limits, name) {
			out = append(out, name)
		}
	}
	return out
}

func sameQuantity(a, b corev1.ResourceList, name corev1.ResourceName) bool {
	qa, oka := a[name]
	qb, okb := b[name]
	if !oka || !okb {
		return oka == okb || (qa.IsZero() && qb.IsZero())
	}
	return qa.Cmp(qb) == 0
}

// needsRestart: a changed resource's resize restarts the container (podrules.ResizeRestarts).
func needsRestart(c *corev1.Container, changed []corev1.ResourceName) bool {
	for _, name := range changed {
		if podrules.ResizeRestarts(c, name) {
			return true
		}
	}
	return false
}

// resizeReport says whether the pod's running regular and sidecar containers and its pod cgroup run with
// their allocation (the kubelet's IsPodResizeInProgress; a running non-sidecar init container does not hold
// a resize).
func resizeReport(pod *corev1.Pod, st *runtime.PodStatus, act Actuation, err error) *ResizeReport {
	r := &ResizeReport{Err: err, InProgress: st.ReadySandbox() != nil && podLevelResizeInProgress(pod, act)}
	for _, rc := range runningResizable(pod, st) {
		if rc.kind == runtime.KindInit {
			continue
		}
		current, _ := act.Actuated(pod.UID, rc.container.Name)
		if len(changedResources(current, allocation.EffectiveResources(pod, rc.container))) > 0 {
			r.InProgress = true
		}
	}
	return r
}

// updateContainers updates the running containers in place, as the kubelet's doPodResizeAction: memory
// then cpu, each with its decreases before its increases. Each container's record is updated as its
// update lands, so a failure leaves the rest to the next sync.
func (s *resizer) updateContainers(ctx context.Context, pod *corev1.Pod, updates []resizeUpdate) error {
	for _, name := range resizedResources {
		for _, increase := range []bool{false, true} {
			for i := range updates {
				u := &updates[i]
				if sameQuantity(u.current.Limits, u.desired.Limits, name) && sameQuantity(u.current.Requests, u.desired.Requests, name) {
					continue
				}
				if grows(u, name) != increase {
					continue
				}
				if err := s.updateContainer(ctx, pod, u, name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// grows: the update raises the resource's limit (or, with the limit unchanged, its request).
func grows(u *resizeUpdate, name corev1.ResourceName) bool {
	cur, des := u.current.Limits[name], u.desired.Limits[name]
	if cur.Cmp(des) == 0 {
		cur, des = u.current.Requests[name], u.desired.Requests[name]
	}
	if cur.IsZero() && !des.IsZero() {
		return false // a limit added where there was none lowers it
	}
	return des.IsZero() || des.Cmp(cur) > 0
}

// updateContainer applies the resource name's desired values to the container (its other resource as
// actuated) with UpdateContainerResources, and records them.
func (s *resizer) updateContainer(ctx context.Context, pod *corev1.Pod, u *resizeUpdate, name corev1.ResourceName) error {
	next := u.current.DeepCopy()
	setResource(next, u.desired, name)
	c := u.container.DeepCopy()
	c.Resources = *next
	res := podconfig.ContainerResources(pod, c, s.config.resourceOptions(ctx))
	ctrl.LoggerFrom(ctx).V(1).Info("Resizing container in place", "container", u.container.Name, "resource", name,
		"cpuShares", res.CpuShares, "cpuQuota", res.CpuQuota, "memoryLimit", res.MemoryLimitInBytes)
	if err := s.cri.UpdateContainerResources(ctx, u.id, res); err != nil {
		return fmt.Errorf("update container %q resources: %w", u.container.Name, err)
	}
	if err := s.actuation.SetActuated(pod, c); err != nil {
		return err
	}
	u.current = *next
	return nil
}

// setResource copies name's request and limit (or their absence) from src into dst.
func setResource(dst *corev1.ResourceRequirements, src corev1.ResourceRequirements, name corev1.ResourceName) {
	for _, l := range []struct {
		dst *corev1.ResourceList
		src corev1.ResourceList
	}{{&dst.Requests, src.Requests}, {&dst.Limits, src.Limits}} {
		q, ok := l.src[name]
		if !ok {
			delete(*l.dst, name)
			continue
		}
		if *l.dst == nil {
			*l.dst = corev1.ResourceList{}
		}
		(*l.dst)[name] = q.DeepCopy()
	}
}

// actuatedPod is the pod as its containers and its cgroup were last given resources (the allocation where no
// record is).
func (s *resizer) actuatedPod(pod *corev1.Pod) *corev1.Pod {
	return podrules.WithAppliedResources(pod,
		func() (*corev1.ResourceRequirements, bool) { return s.actuation.ActuatedPodLevel(pod.UID) },
		func(name string) (corev1.ResourceRequirements, bool) { return s.actuation.Actuated(pod.UID, name) })
}

// checkMemoryDecrease refuses a memory limit decrease that would put a container or the pod below what it
// uses now, as the kubelet's validatePodResizeAction: the kernel would have to reclaim or OOM-kill. The pod's
// limit is its cgroup's: the one last applied against the (allocated) pod's.
func (s *resizer) checkMemoryDecrease(ctx context.Context, sandboxID string, ps *PodState, pod *corev1.Pod, updates []resizeUpdate) error {
	decreasing := decreasingContainerLimits(updates)
	podLimit := s.decreasingPodMemoryLimit(ps, pod)
	if len(decreasing) == 0 && podLimit == nil {
		return nil
	}
	stats, err := s.cri.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{PodSandboxId: sandboxID})
	if err != nil {
		return fmt.Errorf("cannot decrease memory limits: %w", err)
	}
	usage := map[string]*runtimeapi.UInt64Value{}
	var podUsage uint64
	for _, st := range stats {
		usage[st.GetAttributes().GetMetadata().GetName()] = st.GetMemory().GetUsageBytes()
		podUsage += st.GetMemory().GetUsageBytes().GetValue()
	}
	var errs []string
	if podLimit != nil && podUsage >= uint64(*podLimit) {
		errs = append(errs, fmt.Sprintf("attempting to set pod memory limit (%d) below current usage (%d)", *podLimit, podUsage))
	}
	for _, u := range updates {
		if limit, ok := decreasing[u.container.Name]; ok {
			errs = append(errs, containerBelowUsage(u.container.Name, limit, usage[u.container.Name])...)
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errors.New("cannot decrease memory limits: " + errs[0])
	}
	return errors.New("cannot decrease memory limits: [" + strings.Join(errs, ", ") + "]")
}

// decreasingContainerLimits are the new memory limits of the updates that add or lower one, by container.
func decreasingContainerLimits(updates []resizeUpdate) map[string]int64 {
	decreasing := map[string]int64{}
	for _, u := range updates {
		cur, des := u.current.Limits[corev1.ResourceMemory], u.desired.Limits[corev1.ResourceMemory]
		if !des.IsZero() && (cur.IsZero() || des.Cmp(cur) < 0) {
			decreasing[u.container.Name] = des.Value()
		}
	}
	return decreasing
}

// containerBelowUsage is why a container's new memory limit cannot be set, if it cannot.
func containerBelowUsage(name string, limit int64, used *runtimeapi.UInt64Value) []string {
	switch {
	case used == nil:
		return []string{fmt.Sprintf("missing container %q memory usage", name)}
	case used.GetValue() >= uint64(limit):
		return []string{fmt.Sprintf("attempting to set container %q memory limit (%d) below current usage (%d)", name, limit, used.GetValue())}
	}
	return nil
}

// decreasingPodMemoryLimit is the pod cgroup's new memory limit when the resize adds or lowers it, else nil.
func (s *resizer) decreasingPodMemoryLimit(ps *PodState, pod *corev1.Pod) *int64 {
	if podconfig.PodCgroupParent(pod, s.cgroups.sandboxOpts) == "" {
		return nil
	}
	class := podrules.GetPodQOS(pod)
	desired := podrules.PodCgroupResources(pod, class).MemoryLimit
	if desired == nil {
		return nil
	}
	current := podrules.PodCgroupResources(s.actuatedPod(pod), class).MemoryLimit
	if ps.podCgroup != nil {
		current = ps.podCgroup.MemoryLimit
	}
	if current != nil && *desired >= *current {
		return nil
	}
	return desired
}

// syncPodCgroup keeps the pod cgroup's cpu and memory on the (allocated) pod's values: while containers
// are resized (in place or by a restart under way) it holds the larger of the values last applied and the
// desired ones, so no container is squeezed; once none is, the desired values. The values last applied are
// remembered per pod (unknown after an agent restart: written again once).
func (c *cgroupKeeper) syncPodCgroup(ps *PodState, pod, actuated *corev1.Pod, resizing bool) error {
	if podconfig.PodCgroupParent(pod, c.sandboxOpts) == "" {
		return nil // no pod cgroups: the runtime keeps the pod's cgroup
	}
	class := podrules.GetPodQOS(pod)
	want := podrules.PodCgroupResources(pod, class)
	if resizing {
		last := podrules.PodCgroupResources(actuated, class)
		if ps.podCgroup != nil {
			last = *ps.podCgroup
		}
		want = upper(last, want)
	}
	if ps.podCgroup != nil && equality.Semantic.DeepEqual(*ps.podCgroup, want) {
		return nil
	}
	parent := podconfig.PodCgroupName(pod, c.sandboxOpts).ToCgroupfs()
	if err := c.podCgroups.Ensure(parent, want); err != nil {
		return fmt.Errorf("resize pod cgroup: %w", err)
	}
	ps.podCgroup = &want
	return nil
}

// upper is, for each of cpu shares, cpu quota and memory limit, the larger of a's and b's (no limit being
// the largest).
func upper(a, b podrules.PodCgroup) podrules.PodCgroup {
	out := b
	out.CPUShares = max(a.CPUShares, b.CPUShares)
	out.CPUQuota = largerLimit(a.CPUQuota, b.CPUQuota)
	out.MemoryLimit = largerLimit(a.MemoryLimit, b.MemoryLimit)
	return out
}

func largerLimit(a, b *int64) *int64 {
	if a == nil || b == nil {
		return nil
	}
	v := max(*a, *b)
	return &v
}
