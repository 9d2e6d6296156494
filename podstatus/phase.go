package podstatus

import (
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
)

// phaseCounts tallies container states the way the kubelet's getPhase does.
type phaseCounts struct {
	pendingInit, pendingSidecars, failedInitNotRestartable               int
	unknown, running, waiting, stopped, stoppedNotRestartable, succeeded int
}

// setPhase decides the phase, reason and message (generateAPIPodStatus): the containers' phase, a
// terminal old phase kept, the old reason and message kept with the old phase, and the agent's override.
func (b *builder) setPhase(s *corev1.PodStatus) {
	all := concatStatuses(s.ContainerStatuses, s.InitContainerStatuses)
	s.Phase = b.containersPhase(all)
	old := b.old.Phase
	if !podrules.IsTerminalPhase(s.Phase) && podrules.IsTerminalPhase(old) {
		s.Phase = old
	}
	if s.Phase == old {
		s.Reason, s.Message = b.old.Reason, b.old.Message
	}
	if o := b.in.Override; o != nil {
		s.Phase, s.Reason, s.Message = o.Phase, o.Reason, o.Message
	}
	if podrules.IsTerminalPhase(old) && s.Phase != old {
		s.Phase = old // a terminal phase never changes
	}
}

// containersPhase is the kubelet's getPhase with its default feature gates (ContainerRestartRules on).
func (b *builder) containersPhase(info []corev1.ContainerStatus) corev1.PodPhase {
	var n phaseCounts
	spec := &b.pod.Spec
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if podrules.IsSidecar(c) {
			n.countSidecar(FindStatus(info, c.Name))
		} else {
			n.countInit(b, c, FindStatus(info, c.Name))
		}
	}
	for i := range spec.Containers {
		n.countRegular(b, &spec.Containers[i], FindStatus(info, spec.Containers[i].Name))
	}
	if n.failedInitNotRestartable > 0 {
		return corev1.PodFailed
	}
	return n.phase(b.in.Terminated && !podrules.IsStaticPod(b.pod), b.hasActiveRegularContainer())
}

func (n *phaseCounts) phase(podIsTerminal, podHasInitialized bool) corev1.PodPhase {
	switch {
	case n.pendingInit > 0 || (n.pendingSidecars > 0 && !podHasInitialized), n.waiting > 0:
		return corev1.PodPending
	case n.running > 0 && n.unknown == 0:
		return corev1.PodRunning
	case n.running == 0 && n.stopped > 0 && n.unknown == 0:
		switch {
		case !podIsTerminal && n.stopped != n.stoppedNotRestartable:
			return corev1.PodRunning // some container restarts
		case n.stopped == n.succeeded:
			return corev1.PodSucceeded
		default:
			return corev1.PodFailed
		}
	default:
		return corev1.PodPending
	}
}

func (n *phaseCounts) countInit(b *builder, c *corev1.Container, st *corev1.ContainerStatus) {
	var last *corev1.ContainerStateTerminated
	switch {
	case st == nil || st.State.Running != nil:
		n.pendingInit++
		return
	case st.State.Terminated != nil:
		last = st.State.Terminated
	case st.State.Waiting != nil && st.LastTerminationState.Terminated != nil:
		last = st.LastTerminationState.Terminated
	default:
		n.pendingInit++
		return
	}
	if last.ExitCode != 0 && !b.restartable(c, last) {
		n.failedInitNotRestartable++
	}
}

func (n *phaseCounts) countSidecar(st *corev1.ContainerStatus) {
	switch {
	case st == nil:
		n.unknown++
	case st.State.Running != nil:
		if st.Started == nil || !*st.Started {
			n.pendingSidecars++
		}
		n.running++
	case st.State.Terminated != nil, st.State.Waiting != nil && st.LastTerminationState.Terminated != nil:
		// a stopped sidecar does not count
	case st.State.Waiting != nil:
		n.pendingSidecars++
		n.waiting++
	default:
		n.pendingSidecars++
		n.unknown++
	}
}

func (n *phaseCounts) countRegular(b *builder, c *corev1.Container, st *corev1.ContainerStatus) {
	switch {
	case st == nil:
		n.unknown++
	case st.State.Running != nil:
		n.running++
	case st.State.Terminated != nil:
		n.stopped++
		if !b.restartable(c, st.State.Terminated) {
			n.stoppedNotRestartable++
		}
		if st.State.Terminated.ExitCode == 0 {
			n.succeeded++
		}
	case st.State.Waiting != nil && st.LastTerminationState.Terminated != nil:
		n.stopped++
		if !b.restartable(c, st.LastTerminationState.Terminated) {
			n.stoppedNotRestartable++
		}
	case st.State.Waiting != nil:
		n.waiting++
	default:
		n.unknown++
	}
}

// restartable: the container's restart policy restarts it after this exit, or all containers restart.
func (b *builder) restartable(c *corev1.Container, t *corev1.ContainerStateTerminated) bool {
	return podrules.ContainerShouldRestart(c, &b.pod.Spec, t.ExitCode) || t.Reason == reasonRestartingAllContainers
}

// hasActiveRegularContainer: a regular container exists in the newest sandbox, which is ready; the pod
// has then been initialized.
func (b *builder) hasActiveRegularContainer() bool {
	sb := b.rt.ReadySandbox()
	if sb == nil {
		return false
	}
	for _, a := range b.rt.Containers {
		if a.SandboxID == sb.Id && containerOfKind(b.pod, a.Name, podrules.RegularContainer) != nil {
			return true
		}
	}
	return false
}

// anySandboxReady: some sandbox of the pod is ready.
func (b *builder) anySandboxReady() bool {
	for _, sb := range b.rt.Sandboxes {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			return true
		}
	}
	return false
}
