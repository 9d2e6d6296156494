package podstatus

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/podrules"
)

// applyProbes sets started and ready like the kubelet's prober manager (UpdatePodStatus): a container is
// started once running and its startup probe (if any) succeeded, ready once started, running and its
// readiness probe (if any) succeeded; a regular init container is ready once it exited 0. Ephemeral
// containers are left alone.
func (b containerRules) applyProbes(s *corev1.PodStatus) {
	for i := range s.ContainerStatuses {
		st := &s.ContainerStatuses[i]
		b.ctrs.probe(containerOfKind(b.pod, st.Name, podrules.RegularContainer), st)
	}
	for i := range s.InitContainerStatuses {
		st := &s.InitContainerStatuses[i]
		c := containerOfKind(b.pod, st.Name, podrules.InitContainer)
		if podrules.IsSidecar(c) {
			b.ctrs.probe(c, st)
			continue
		}
		started := b.ctrs.started(c, st)
		st.Started = &started
		if t := st.State.Terminated; t != nil && t.ExitCode == 0 {
			st.Ready = true
		}
	}
}

// probe sets started, and ready when started (an unstarted container keeps its ready value).
func (b containerRules) probe(c *corev1.Container, st *corev1.ContainerStatus) {
	started := b.ctrs.started(c, st)
	st.Started = &started
	if started {
		st.Ready = b.ctrs.ready(c, st)
	}
}

func (b containerRules) started(c *corev1.Container, st *corev1.ContainerStatus) bool {
	if st.State.Running == nil {
		return false
	}
	if b.in.Started == nil {
		return true
	}
	if started, known := b.in.Started(runtimeID(st.ContainerID)); known {
		return started
	}
	if st.Started != nil && *st.Started {
		return true // started before, as the old status says
	}
	return c == nil || c.StartupProbe == nil
}

func (b containerRules) ready(c *corev1.Container, st *corev1.ContainerStatus) bool {
	if st.State.Running == nil {
		return false
	}
	if b.in.Ready == nil {
		return true
	}
	if ready, known := b.in.Ready(runtimeID(st.ContainerID)); known {
		return ready
	}
	return c == nil || c.ReadinessProbe == nil
}
