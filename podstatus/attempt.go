package podstatus

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
)

// convertAttempt is the status of one runtime attempt (the kubelet's convertContainerStatus).
func (b containerRules) convertAttempt(a *runtime.ContainerStatus, old *corev1.ContainerStatus) *corev1.ContainerStatus {
	st := &corev1.ContainerStatus{
		Name:         a.Name,
		RestartCount: int32(a.RestartCount),
		Image:        a.Image,
		ImageID:      a.ImageRef,
		ContainerID:  b.containerID(a.ID),
	}
	if old != nil {
		inherit(st, old)
	}
	switch {
	case a.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
		st.State.Running = &corev1.ContainerStateRunning{StartedAt: apiTime(a.StartedAt)}
		if old != nil && old.State.Terminated != nil && old.RestartCount >= int32(a.RestartCount) {
			st.RestartCount = old.RestartCount + 1
		}
		if old != nil && old.Started != nil {
			started := *old.Started
			st.Started = &started
		}
	case a.State == runtimeapi.ContainerState_CONTAINER_EXITED:
		st.State.Terminated = b.ctrs.terminated(a, st.ContainerID)
	case a.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN && old != nil && old.State.Running != nil:
		// It ran and is gone without a trace: report a failure rather than "never ran".
		st.State.Terminated = &corev1.ContainerStateTerminated{Reason: b.ctrs.lostReason(), Message: msgLostWhenTerminated, ExitCode: 137}
		st.RestartCount = old.RestartCount + 1
	default:
		// Created but not started, or unknown: waiting to run.
		st.State.Waiting = &corev1.ContainerStateWaiting{}
	}
	st.User = containerUser(a.User)
	if c, _ := podrules.FindContainer(b.pod, a.Name); c != nil {
		st.Resources = statusResources(c, a, st, old, b.in.actuated(a.Name))
		st.AllocatedResources = c.Resources.Requests.DeepCopy()
	}
	return st
}

// inherit keeps what the runtime cannot tell: volume mounts, a restart count larger than the attempt's
// (containers garbage collected) and the last termination of an attempt the runtime no longer has.
func inherit(st, old *corev1.ContainerStatus) {
	st.VolumeMounts = old.VolumeMounts
	if old.RestartCount > st.RestartCount {
		st.RestartCount = old.RestartCount
	}
	switch {
	case old.ContainerID != st.ContainerID && old.State.Terminated != nil:
		st.LastTerminationState.Terminated = old.State.Terminated.DeepCopy()
	case old.LastTerminationState.Terminated != nil:
		st.LastTerminationState.Terminated = old.LastTerminationState.Terminated.DeepCopy()
	}
}

func (b containerRules) lostReason() string {
	if b.restarting {
		return reasonRestartingAllContainers
	}
	return reasonStatusUnknown
}

// terminated is the state of an exited attempt. The message is the runtime's, followed by the
// termination message when there is one.
func (b containerRules) terminated(a *runtime.ContainerStatus, containerID string) *corev1.ContainerStateTerminated {
	msg := a.Message
	if f := b.in.TerminationMessage; f != nil {
		if t := f(a); t != "" {
			if msg != "" {
				msg += ": "
			}
			msg += t
		}
	}
	return &corev1.ContainerStateTerminated{
		ExitCode:    a.ExitCode,
		Reason:      exitReason(a),
		Message:     msg,
		StartedAt:   apiTime(a.StartedAt),
		FinishedAt:  apiTime(a.FinishedAt),
		ContainerID: containerID,
	}
}

// exitReason is the runtime's reason ("Completed", "Error", "OOMKilled", "ContainerCannotRun",
// "StartError"), or Completed/Error by exit code when the runtime gave none.
func exitReason(a *runtime.ContainerStatus) string {
	switch {
	case a.Reason != "":
		return a.Reason
	case a.ExitCode == 0:
		return "Completed"
	default:
		return "Error"
	}
}

// apiTime converts a runtime time like the kubelet: a time the runtime left unset is the Unix epoch.
func apiTime(t time.Time) metav1.Time {
	if t.IsZero() {
		t = time.Unix(0, 0)
	}
	return metav1.NewTime(t)
}

// containerUser is the user the runtime reports for the attempt (the kubelet's convertContainerStatusUser):
// nil when it reports none, without linux when it reports no Linux user.
func containerUser(u *runtimeapi.ContainerUser) *corev1.ContainerUser {
	if u == nil {
		return nil
	}
	out := &corev1.ContainerUser{}
	if l := u.GetLinux(); l != nil {
		out.Linux = &corev1.LinuxContainerUser{UID: l.GetUid(), GID: l.GetGid(), SupplementalGroups: l.GetSupplementalGroups()}
	}
	return out
}
