package podstatus

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/podrules"
)

// maxTerminationMessageBytes is shared by all containers of a pod (the kubelet's
// MaxPodTerminationMessageLogLength).
const maxTerminationMessageBytes = 12 * 1024

// timedConditions are the conditions whose transition time the status manager maintains.
var timedConditions = []corev1.PodConditionType{
	corev1.ContainersReady, corev1.PodReady, corev1.PodInitialized, corev1.PodReadyToStartContainers,
	corev1.PodScheduled, corev1.DisruptionTarget, corev1.AllContainersRestarting,
}

// record is the status manager's updateStatusInternal: it refuses a terminated container coming back,
// keeps transition times while a condition's status holds, keeps the start time (or sets it now) and the
// volume health, and normalizes the status as the API stores it.
func (b cacheRules) record(s *corev1.PodStatus) bool {
	if !b.cache.legalTransition(s) {
		return false
	}
	for _, t := range timedConditions {
		b.cache.setTransitionTime(s.Conditions, t)
	}
	switch {
	case b.old.StartTime != nil && !b.old.StartTime.IsZero():
		s.StartTime = b.old.StartTime.DeepCopy()
	case s.StartTime == nil || s.StartTime.IsZero():
		now := b.now
		s.StartTime = &now
	}
	if len(b.old.VolumeHealth) > 0 && len(s.VolumeHealth) == 0 {
		s.VolumeHealth = append([]corev1.PodVolumeHealth(nil), b.old.VolumeHealth...)
	}
	s.ObservedGeneration = max(s.ObservedGeneration, b.old.ObservedGeneration)
	b.cache.normalize(s)
	return true
}

func (b cacheRules) setTransitionTime(conds []corev1.PodCondition, t corev1.PodConditionType) {
	c := findCondition(conds, t)
	if c == nil {
		return
	}
	c.LastTransitionTime = b.now
	if old := findCondition(b.old.Conditions, t); old != nil && old.Status == c.Status {
		c.LastTransitionTime = old.LastTransitionTime
	}
}

// legalTransition is the kubelet's checkContainerStateTransition: a terminated container may only leave
// that state if its pod or container restart policy restarts it.
func (b cacheRules) legalTransition(s *corev1.PodStatus) bool {
	spec := &b.pod.Spec
	if spec.RestartPolicy == corev1.RestartPolicyAlways || podrules.AllContainersCouldRestart(spec) {
		return true
	}
	return b.cache.staysTerminated(podrules.RegularContainer, b.old.ContainerStatuses, s.ContainerStatuses) &&
		b.cache.staysTerminated(podrules.InitContainer, b.old.InitContainerStatuses, s.InitContainerStatuses)
}

func (b cacheRules) staysTerminated(kind podrules.ContainerKind, old, now []corev1.ContainerStatus) bool {
	for i := range old {
		t := old[i].State.Terminated
		c := containerOfKind(b.pod, old[i].Name, kind)
		if t == nil || (kind == podrules.InitContainer && podrules.IsSidecar(c)) {
			continue
		}
		if t.ExitCode != 0 && b.pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure {
			continue
		}
		if c != nil && podrules.ContainerShouldRestart(c, &b.pod.Spec, t.ExitCode) {
			continue
		}
		if st := FindStatus(now, old[i].Name); st != nil && st.State.Terminated == nil {
			return false
		}
	}
	return true
}

// terminate is the status manager's TerminatePod: once the pod is terminated, containers without a
// terminated state are reported lost, and a pod still Pending or Running fails.
func (b cacheRules) terminate(s *corev1.PodStatus) {
	if b.cache.hasPodInitialized() {
		markLost(s.ContainerStatuses)
	}
	markLost(initializedContainers(s.InitContainerStatuses))
	if podrules.IsStaticPod(b.pod) {
		return
	}
	if !podrules.IsTerminalPhase(s.Phase) {
		s.Phase = corev1.PodFailed
	}
}

func markLost(statuses []corev1.ContainerStatus) {
	for i := range statuses {
		if statuses[i].State.Terminated == nil {
			statuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: reasonStatusUnknown, Message: msgLostWhenTerminated, ExitCode: 137,
			}}
		}
	}
}

// hasPodInitialized: the API status shows evidence that a regular container started or the last init
// container completed (sidecar: started).
func (b cacheRules) hasPodInitialized() bool {
	spec, old := &b.pod.Spec, b.old
	if len(spec.InitContainers) == 0 {
		return true
	}
	for _, st := range old.ContainerStatuses {
		if st.LastTerminationState.Terminated != nil || st.State.Waiting == nil {
			return true
		}
	}
	l := len(old.InitContainerStatuses)
	if l == 0 || l > len(spec.InitContainers) || spec.InitContainers[l-1].Name != old.InitContainerStatuses[l-1].Name {
		return false
	}
	last := old.InitContainerStatuses[l-1]
	if podrules.IsSidecar(&spec.InitContainers[l-1]) {
		return last.State.Running != nil && last.Started != nil && *last.Started
	}
	succeeded := func(t *corev1.ContainerStateTerminated) bool { return t != nil && t.ExitCode == 0 }
	return succeeded(last.LastTerminationState.Terminated) || succeeded(last.State.Terminated)
}

// initializedContainers drops the trailing init containers that never tried to start (keeping at least
// the first one).
func initializedContainers(statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
	for i := len(statuses) - 1; i >= 0; i-- {
		if statuses[i].State.Waiting == nil || statuses[i].LastTerminationState.Terminated != nil {
			return statuses[:i+1]
		}
	}
	if len(statuses) > 0 {
		return statuses[:1]
	}
	return nil
}

// merge is the status manager's mergePodStatus against the API status: conditions the kubelet does not
// own stay as they are, the API's claim statuses stay, a terminal phase waits until no container could run, and a
// terminal pod is never ready.
func (b cacheRules) merge(s corev1.PodStatus, couldHaveRunningContainers bool) corev1.PodStatus {
	old := b.old
	conds := foreignConditions(b.api().Conditions)
	// The DisruptionTarget condition this agent added is the API's from its write on; until the API copy
	// shows that write (an informer cache behind it), the agent's own copy stands in, or the next write
	// would take the condition out again.
	if findCondition(conds, corev1.DisruptionTarget) == nil {
		if c := findCondition(old.Conditions, corev1.DisruptionTarget); c != nil {
			conds = append(conds, *c.DeepCopy())
		}
	}
	transitioning := !podrules.IsTerminalPhase(old.Phase) && podrules.IsTerminalPhase(s.Phase)
	for _, c := range s.Conditions {
		switch {
		case kubeletConditions[c.Type]:
			conds = append(conds, c)
		case c.Type == corev1.DisruptionTarget && transitioning && !couldHaveRunningContainers:
			conds = b.conds.updateCondition(conds, c)
		}
	}
	s.Conditions = conds
	// Claim statuses belong to the resource claim controller: the API's, as the kubelet's mergePodStatus
	// takes them from the pod it just read (not from its own cache).
	claims := b.api().DeepCopy()
	s.ResourceClaimStatuses = claims.ResourceClaimStatuses
	s.ExtendedResourceClaimStatus = claims.ExtendedResourceClaimStatus
	s.NodeAllocatableResourceClaimStatuses = claims.NodeAllocatableResourceClaimStatuses
	if transitioning && couldHaveRunningContainers {
		s.Phase, s.Reason, s.Message = old.Phase, old.Reason, old.Message
	}
	if podrules.IsTerminalPhase(s.Phase) && (conditionTrue(s.Conditions, corev1.PodReady) || conditionTrue(s.Conditions, corev1.ContainersReady)) {
		s.Conditions = b.conds.updateCondition(s.Conditions, b.conds.terminalCondition(corev1.ContainersReady, s.Phase))
		s.Conditions = b.conds.updateCondition(s.Conditions, b.conds.terminalCondition(corev1.PodReady, s.Phase))
	}
	return s
}

func conditionTrue(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	c := findCondition(conds, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

// normalize truncates times to seconds and termination messages to the pod's share, and orders the
// container statuses (the kubelet's normalizeStatus).
func (b cacheRules) normalize(s *corev1.PodStatus) {
	normalizeTimes(s)
	n := len(b.pod.Spec.Containers) + len(b.pod.Spec.InitContainers) + len(b.pod.Spec.EphemeralContainers)
	limit := maxTerminationMessageBytes
	if n > 0 {
		limit /= n
	}
	for _, list := range [][]corev1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			truncateMessage(list[i].State.Terminated, limit)
			truncateMessage(list[i].LastTerminationState.Terminated, limit)
		}
	}
	sort.SliceStable(s.ContainerStatuses, func(i, j int) bool { return s.ContainerStatuses[i].Name < s.ContainerStatuses[j].Name })
	sort.SliceStable(s.EphemeralContainerStatuses, func(i, j int) bool {
		return s.EphemeralContainerStatuses[i].Name < s.EphemeralContainerStatuses[j].Name
	})
}

func truncateMessage(t *corev1.ContainerStateTerminated, limit int) {
	if t != nil && len(t.Message) > limit {
		t.Message = t.Message[:limit]
	}
}

// normalizeTimes truncates every timestamp of the status to the second, as the API stores them.
func normalizeTimes(s *corev1.PodStatus) {
	if s.StartTime != nil {
		*s.StartTime = s.StartTime.Rfc3339Copy()
	}
	for i := range s.Conditions {
		s.Conditions[i].LastProbeTime = s.Conditions[i].LastProbeTime.Rfc3339Copy()
		s.Conditions[i].LastTransitionTime = s.Conditions[i].LastTransitionTime.Rfc3339Copy()
	}
	for _, list := range [][]corev1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			normalizeState(&list[i].State)
			normalizeState(&list[i].LastTerminationState)
		}
	}
}

func normalizeState(c *corev1.ContainerState) {
	if c.Running != nil {
		c.Running.StartedAt = c.Running.StartedAt.Rfc3339Copy()
	}
	if c.Terminated != nil {
		c.Terminated.StartedAt = c.Terminated.StartedAt.Rfc3339Copy()
		c.Terminated.FinishedAt = c.Terminated.FinishedAt.Rfc3339Copy()
	}
}
