package podsyncer

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/podstatus"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// PodStatus is the status the pod has now, from sc.Runtime, the runtime state a sync left (the kubelet's
// generateAPIPodStatus). It builds on the status last set (the status manager's cache); api is the status the
// API holds, whose conditions owned by others (readiness gates) it keeps.
func (s *Syncer) PodStatus(ctx context.Context, sc *Scope, api *corev1.PodStatus) corev1.PodStatus {
	ps, pod := sc.State, sc.Pod
	in := podstatus.Input{
		API: api,
		Pod: pod, Runtime: sc.Runtime, Waiting: ps.waitingSnapshot(), HostIPs: s.hostIPs, Override: ps.outcome,
		Terminating: sc.Terminating || sc.Terminated, Terminated: sc.Terminated,
		RuntimeName: s.runtimeName(ctx), Now: s.clock.Now(), Ready: s.probes.Ready, Started: s.probes.Started,
		ResizeConditions: sc.ResizeConditions,
		DeviceHealth: func(container string) []corev1.ResourceStatus {
			return append(s.config.devices.AllocatedResourcesStatus(pod.UID, container),
				s.config.dra.AllocatedResourcesStatus(pod, container)...)
		},
		Actuated: func(container string) (corev1.ResourceRequirements, bool) {
			return s.resize.actuation.Actuated(pod.UID, container)
		},
		ActuatedPodLevel: func() (*corev1.ResourceRequirements, bool) {
			return s.resize.actuation.ActuatedPodLevel(pod.UID)
		},
		TerminationMessage: func(c *runtime.ContainerStatus) string {
			return podconfig.ReadTerminationMessage(terminationLogPath(c), corev1.TerminationMessagePolicy(c.TerminationMessagePolicy), c.ExitCode, c.LogPath)
		},
	}
	if last := s.statuses.Status(pod.UID); last != nil {
		p := pod.DeepCopy()
		p.Status = *last
		in.Pod = p
	}
	return podstatus.Compute(in)
}

// terminationLogPath is where the agent keeps an attempt's termination message on the host: the mount
// source of the container's terminationMessagePath (recorded by the runtime in its mounts).
func terminationLogPath(c *runtime.ContainerStatus) string { return c.TerminationLogHostPath }

// runtimeName is the runtime's name ("containerd"), the prefix of container IDs in pod status.
func (s *Syncer) runtimeName(ctx context.Context) string {
	s.mu.Lock()
	name := s.rtName
	s.mu.Unlock()
	if name != "" {
		return name
	}
	v, err := s.cri.Version(ctx)
	if err != nil {
		return "containerd"
	}
	s.mu.Lock()
	s.rtName = v.RuntimeName
	s.mu.Unlock()
	return v.RuntimeName
}
