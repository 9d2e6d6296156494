package podstatus

import (
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
)

// shouldAllContainersRestart: the old status says the pod restarts in place, or a container's exit
// (in the runtime or in the old status) matches a RestartAllContainers rule.
func (b *builder) shouldAllContainersRestart() bool {
	if !podrules.AllContainersCouldRestart(&b.pod.Spec) {
		return false
	}
	if conditionTrue(b.old.Conditions, corev1.AllContainersRestarting) {
		return true
	}
	for _, cs := range [][]corev1.Container{b.pod.Spec.InitContainers, b.pod.Spec.Containers} {
		for i := range cs {
			if b.exitTriggersRestartAll(&cs[i]) {
				return true
			}
		}
	}
	return false
}

func (b *builder) exitTriggersRestartAll(c *corev1.Container) bool {
	if a := b.rt.FindContainer(c.Name); a != nil && a.State == runtimeapi.ContainerState_CONTAINER_EXITED && podrules.TriggersRestartAll(c, a.ExitCode) {
		return true
	}
	st := FindStatus(b.old.InitContainerStatuses, c.Name)
	if st == nil {
		st = FindStatus(b.old.ContainerStatuses, c.Name)
	}
	return st != nil && st.State.Terminated != nil && podrules.TriggersRestartAll(c, st.State.Terminated.ExitCode)
}

// allContainersGone: the runtime holds no init or regular container of the pod any more.
func (b *builder) allContainersGone() bool {
	for _, cs := range [][]corev1.Container{b.pod.Spec.InitContainers, b.pod.Spec.Containers} {
		for i := range cs {
			if b.rt.FindContainer(cs[i].Name) != nil {
				return false
			}
		}
	}
	return true
}

// AllContainersRestarting reports whether s, a status Compute returned, has the AllContainersRestarting
// condition true: a RestartAllContainers rule fired (now, or earlier as the old status says), the pod's
// phase is not terminal and the runtime still holds some of its init or regular containers. The kubelet
// hands this to its runtime sync, which then removes every container of the pod.
func AllContainersRestarting(s *corev1.PodStatus) bool {
	return conditionTrue(s.Conditions, corev1.AllContainersRestarting)
}
