package podstatus

import (
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// allContainersCouldRestart: some container has a RestartAllContainers rule.
func allContainersCouldRestart(spec *corev1.PodSpec) bool {
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			for _, rule := range cs[i].RestartPolicyRules {
				if rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers {
					return true
				}
			}
		}
	}
	return false
}

// shouldAllContainersRestart: the old status says the pod restarts in place, or a container's exit
// (in the runtime or in the old status) matches a RestartAllContainers rule.
func (b *builder) shouldAllContainersRestart() bool {
	if !allContainersCouldRestart(&b.pod.Spec) {
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
	triggers := func(exitCode int32) bool {
		rule, ok := matchingRestartRule(c, exitCode)
		return ok && rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers
	}
	if a := b.rt.FindContainer(c.Name); a != nil && a.State == runtimeapi.ContainerState_CONTAINER_EXITED && triggers(a.ExitCode) {
		return true
	}
	st := findStatus(b.old.InitContainerStatuses, c.Name)
	if st == nil {
		st = findStatus(b.old.ContainerStatuses, c.Name)
	}
	return st != nil && st.State.Terminated != nil && triggers(st.State.Terminated.ExitCode)
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
