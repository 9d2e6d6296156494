package podrules

import corev1 "k8s.io/api/core/v1"

// The restart decision of the kubelet v1.37 with its default feature gates: ContainerRestartRules and
// RestartAllContainersOnContainerExits are both on (beta since 1.35 and 1.36).

// IsSidecar reports whether c, an init container, is a restartable one (a sidecar): its restartPolicy is
// Always (the kubelet's IsRestartableInitContainer). It does not check that c is an init container.
func IsSidecar(c *corev1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// MatchingRestartRule returns the first of c's restartPolicyRules whose exit codes match exitCode (the
// kubelet's FindMatchingContainerRestartRule). A rule without exitCodes, or with an unknown operator,
// never matches.
func MatchingRestartRule(c *corev1.Container, exitCode int32) (corev1.ContainerRestartRule, bool) {
	for _, rule := range c.RestartPolicyRules {
		if rule.ExitCodes != nil && exitCodesMatch(rule.ExitCodes, exitCode) {
			return rule, true
		}
	}
	return corev1.ContainerRestartRule{}, false
}

func exitCodesMatch(codes *corev1.ContainerRestartRuleOnExitCodes, exitCode int32) bool {
	in := false
	for _, v := range codes.Values {
		in = in || v == exitCode
	}
	switch codes.Operator {
	case corev1.ContainerRestartRuleOnExitCodesOpIn:
		return in
	case corev1.ContainerRestartRuleOnExitCodesOpNotIn:
		return !in
	}
	return false
}

// ContainerShouldRestart reports whether c restarts after exiting with exitCode (the kubelet's
// ContainerShouldRestart): when c sets a restartPolicy, its first matching rule decides if its action is
// Restart or RestartAllContainers (a RestartAllContainers exit restarts every container, c included),
// else c's restartPolicy decides; without one, the pod's restartPolicy (Always when unset) decides.
// Restart rules are only read when c sets a restartPolicy, as validation requires.
func ContainerShouldRestart(c *corev1.Container, spec *corev1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if rule, ok := MatchingRestartRule(c, exitCode); ok {
			switch rule.Action {
			case corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleActionRestartAllContainers:
				return true
			}
		}
		switch *c.RestartPolicy {
		case corev1.ContainerRestartPolicyAlways:
			return true
		case corev1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case corev1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	case corev1.RestartPolicyNever:
		return false
	}
	return true
}

// RestartsAfterKill reports whether c is started again after the kubelet stops it while it runs (a failed
// liveness or startup probe) or after its state is unknown: there is no exit code to match restart rules
// against, so c's restartPolicy decides if set (anything but Never), else the pod's (anything but Never).
func RestartsAfterKill(c *corev1.Container, spec *corev1.PodSpec) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != corev1.ContainerRestartPolicyNever
	}
	return spec.RestartPolicy != corev1.RestartPolicyNever
}

// TriggersRestartAll reports whether c's exit with exitCode matches a RestartAllContainers rule: the
// pod's init and regular containers are then all removed and the pod starts over in its sandbox.
func TriggersRestartAll(c *corev1.Container, exitCode int32) bool {
	rule, ok := MatchingRestartRule(c, exitCode)
	return ok && rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers
}

// AllContainersCouldRestart reports whether some init or regular container of the pod has a
// RestartAllContainers rule (the kubelet's AllContainersCouldRestart): only such pods carry the
// AllContainersRestarting condition, and their terminated containers may run again whatever their
// restart policy.
func AllContainersCouldRestart(spec *corev1.PodSpec) bool {
	if spec == nil {
		return false
	}
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

// AttemptState is the state of a container's newest attempt in the runtime, as the restart decision
// sees it.
type AttemptState int

// The states of a container's newest attempt.
const (
	// NoAttempt: the runtime holds no attempt of the container (never created, or removed).
	NoAttempt AttemptState = iota
	// AttemptCreated: created but not started.
	AttemptCreated
	// AttemptRunning: running.
	AttemptRunning
	// AttemptExited: exited with ExitCode.
	AttemptExited
	// AttemptUnknown: the runtime does not know its state.
	AttemptUnknown
)

// Attempt is what the restart decision needs of a container's newest attempt.
type Attempt struct {
	State    AttemptState
	ExitCode int32
}

// ShouldContainerBeRestarted reports whether c must be started (again) given its newest attempt (the
// kubelet's ShouldContainerBeRestarted): never once the pod is being deleted or while it runs; always
// when it has no attempt, or one that was created but never started, or whose state is unknown; after an
// exit, as ContainerShouldRestart says.
func ShouldContainerBeRestarted(pod *corev1.Pod, c *corev1.Container, last Attempt) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	switch last.State {
	case AttemptRunning:
		return false
	case AttemptExited:
		return ContainerShouldRestart(c, &pod.Spec, last.ExitCode)
	}
	return true
}
