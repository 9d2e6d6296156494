package podstatus

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
)

// Container state reasons and messages the kubelet writes itself.
const (
	reasonContainerCreating       = "ContainerCreating"
	reasonPodInitializing         = "PodInitializing"
	reasonStatusUnknown           = "ContainerStatusUnknown"
	reasonRestartingAllContainers = "RestartingAllContainers"

	msgLostWhenTerminated = "The container could not be located when the pod was terminated"
	msgLostWhenDeleted    = "The container could not be located when the pod was deleted.  The container used to be Running"
	msgRestartingAll      = "The container is removed because RestartAllContainers in place"
	msgInitAssumedDone    = "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally"
)

// containerStatuses is the kubelet's convertToAPIContainerStatuses for one list of containers: a default
// waiting status per container (or the old terminated one), the newest two runtime attempts, and the
// agent's waiting reason for containers due to start. Init statuses come in spec order, others by name.
func (b containerRules) containerStatuses(containers []corev1.Container, previous []corev1.ContainerStatus, isInit bool) []corev1.ContainerStatus {
	if len(containers) == 0 {
		return nil
	}
	old := make(map[string]*corev1.ContainerStatus, len(previous))
	for i := range previous {
		old[previous[i].Name] = &previous[i]
	}
	statuses := make(map[string]*corev1.ContainerStatus, len(containers))
	for i := range containers {
		c := &containers[i]
		statuses[c.Name] = b.ctrs.defaultStatus(c, old[c.Name])
		b.ctrs.markMissing(statuses[c.Name], old[c.Name])
	}
	b.ctrs.applyAttempts(statuses, old)
	for i := range containers {
		b.ctrs.applyWaiting(&containers[i], statuses[containers[i].Name], isInit)
	}
	return b.ctrs.ordered(containers, statuses, isInit)
}

// defaultStatus is a container's status before looking at the runtime: the old status if it terminated,
// else waiting with the old restart count and last termination.
func (b containerRules) defaultStatus(c *corev1.Container, old *corev1.ContainerStatus) *corev1.ContainerStatus {
	if old != nil && old.State.Terminated != nil {
		return old.DeepCopy()
	}
	st := &corev1.ContainerStatus{
		Name:         c.Name,
		Image:        c.Image,
		State:        corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: b.ctrs.defaultWaitingReason()}},
		VolumeMounts: b.ctrs.volumeMountStatuses(c),
	}
	if old != nil {
		st.RestartCount = old.RestartCount
		st.LastTerminationState = *old.LastTerminationState.DeepCopy()
	}
	return st
}

func (b containerRules) defaultWaitingReason() string {
	if len(b.pod.Spec.InitContainers) > 0 {
		return reasonPodInitializing
	}
	return reasonContainerCreating
}

// markMissing handles a container the runtime no longer has although the old status saw it running: the
// kubelet records an unknown termination rather than letting the pod fall back to Pending.
func (b containerRules) markMissing(st, old *corev1.ContainerStatus) {
	if old == nil || b.rt.FindContainer(st.Name) != nil {
		return
	}
	if b.restarting && old.State.Waiting == nil {
		st.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reasonRestartingAllContainers, Message: msgRestartingAll}}
		st.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: reasonRestartingAllContainers, Message: msgRestartingAll, ExitCode: 137}
		st.RestartCount = old.RestartCount + 1
		return
	}
	if old.State.Terminated != nil || old.State.Running == nil {
		return
	}
	defaulted := st.State.Waiting != nil && st.State.Waiting.Reason == b.ctrs.defaultWaitingReason()
	if !defaulted || st.LastTerminationState.Terminated != nil {
		return
	}
	st.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: reasonStatusUnknown, Message: msgLostWhenDeleted, ExitCode: 137}
	if b.pod.DeletionTimestamp == nil {
		st.RestartCount++
	}
}

// applyAttempts converts the newest attempt of each container into its status and the one before into
// its last termination state.
func (b containerRules) applyAttempts(statuses, old map[string]*corev1.ContainerStatus) {
	attempts := append([]*runtime.ContainerStatus(nil), b.rt.Containers...)
	sort.SliceStable(attempts, func(i, j int) bool { return attempts[i].CreatedAt.After(attempts[j].CreatedAt) })
	seen := map[string]int{}
	for _, a := range attempts {
		st, ok := statuses[a.Name]
		if !ok || seen[a.Name] >= 2 {
			continue
		}
		converted := b.ctrs.convertAttempt(a, old[a.Name])
		if seen[a.Name] == 0 {
			statuses[a.Name] = converted
		} else {
			st.LastTerminationState = converted.State
		}
		seen[a.Name]++
	}
}

// applyWaiting shows the agent's reason for a container due to be (re)started, and infers the success of
// init containers the runtime lost once regular containers exist.
func (b containerRules) applyWaiting(c *corev1.Container, st *corev1.ContainerStatus, isInit bool) {
	latest := b.rt.FindContainer(c.Name)
	if isInit {
		if latest != nil && latest.State == runtimeapi.ContainerState_CONTAINER_EXITED && latest.ExitCode == 0 {
			return
		}
		if latest == nil && !podrules.IsSidecar(c) && st.State.Waiting != nil && b.rt.AnyContainerCreated(b.pod.Spec.Containers) {
			st.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", Message: msgInitAssumedDone}}
			return
		}
	}
	if !podrules.ShouldContainerBeRestarted(b.pod, c, latest.Attempt()) {
		return
	}
	w, ok := b.in.Waiting[c.Name]
	if !ok {
		return
	}
	if st.State.Terminated != nil {
		st.LastTerminationState = st.State
	}
	st.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}}
}

// ordered lists init statuses in spec order and the others by name, as the kubelet does.
func (b containerRules) ordered(containers []corev1.Container, statuses map[string]*corev1.ContainerStatus, isInit bool) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, 0, len(statuses))
	for i := range containers {
		if st, ok := statuses[containers[i].Name]; ok {
			out = append(out, *st)
		}
	}
	if !isInit {
		sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	}
	return out
}

// volumeMountStatuses are the status' volumeMounts the kubelet derives from the spec.
func (b containerRules) volumeMountStatuses(c *corev1.Container) []corev1.VolumeMountStatus {
	var out []corev1.VolumeMountStatus
	for _, vm := range c.VolumeMounts {
		s := corev1.VolumeMountStatus{Name: vm.Name, MountPath: vm.MountPath, ReadOnly: vm.ReadOnly}
		if vm.ReadOnly {
			mode := corev1.RecursiveReadOnlyDisabled
			if recursiveReadOnly(vm, b.in.SupportsRecursiveReadOnly) {
				mode = corev1.RecursiveReadOnlyEnabled
			}
			s.RecursiveReadOnly = &mode
		}
		out = append(out, s)
	}
	return out
}

// recursiveReadOnly resolves a mount's recursive read-only mode; invalid requests resolve to false.
func recursiveReadOnly(vm corev1.VolumeMount, supported bool) bool {
	if vm.RecursiveReadOnly == nil || !vm.ReadOnly {
		return false
	}
	if vm.MountPropagation != nil && *vm.MountPropagation != corev1.MountPropagationNone {
		return false
	}
	switch *vm.RecursiveReadOnly {
	case corev1.RecursiveReadOnlyIfPossible, corev1.RecursiveReadOnlyEnabled:
		return supported
	}
	return false
}

// containerOfKind is the pod's container of that name when it is declared as that kind, else nil.
func containerOfKind(pod *corev1.Pod, name string, kind podrules.ContainerKind) *corev1.Container {
	c, k := podrules.FindContainer(pod, name)
	if k != kind {
		return nil
	}
	return c
}

func ephemeralContainers(spec *corev1.PodSpec) []corev1.Container {
	var out []corev1.Container
	for i := range spec.EphemeralContainers {
		out = append(out, corev1.Container(spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	return out
}

// FindStatus is the status of the container name among ss, nil if none.
func FindStatus(ss []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range ss {
		if ss[i].Name == name {
			return &ss[i]
		}
	}
	return nil
}
