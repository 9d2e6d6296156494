package podrules

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func rule(action corev1.ContainerRestartRuleAction, op corev1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) corev1.ContainerRestartRule {
	return corev1.ContainerRestartRule{Action: action,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

var (
	restartOn42    = rule(corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleOnExitCodesOpIn, 42)
	restartAllOn42 = rule(corev1.ContainerRestartRuleActionRestartAllContainers, corev1.ContainerRestartRuleOnExitCodesOpIn, 42)
	restartNotIn01 = rule(corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleOnExitCodesOpNotIn, 0, 1)
)

func ctrPolicy(policy corev1.ContainerRestartPolicy, rules ...corev1.ContainerRestartRule) *corev1.Container {
	c := &corev1.Container{Name: "c", RestartPolicyRules: rules}
	if policy != "" {
		c.RestartPolicy = ptr.To(policy)
	}
	return c
}

func TestContainerShouldRestart(t *testing.T) {
	const (
		podAlways    = corev1.RestartPolicyAlways
		podOnFailure = corev1.RestartPolicyOnFailure
		podNever     = corev1.RestartPolicyNever
		cAlways      = corev1.ContainerRestartPolicyAlways
		cOnFailure   = corev1.ContainerRestartPolicyOnFailure
		cNever       = corev1.ContainerRestartPolicyNever
	)
	tests := []struct {
		name string
		pod  corev1.RestartPolicy
		c    *corev1.Container
		exit int32
		want bool
	}{
		{name: "pod Always restarts a success", pod: podAlways, c: ctrPolicy(""), exit: 0, want: true},
		{name: "pod Always restarts a failure", pod: podAlways, c: ctrPolicy(""), exit: 1, want: true},
		{name: "an unset pod policy is Always", pod: "", c: ctrPolicy(""), exit: 0, want: true},
		{name: "pod OnFailure restarts a failure", pod: podOnFailure, c: ctrPolicy(""), exit: 2, want: true},
		{name: "pod OnFailure keeps a success", pod: podOnFailure, c: ctrPolicy(""), exit: 0},
		{name: "pod Never keeps a failure", pod: podNever, c: ctrPolicy(""), exit: 1},
		{name: "container Never overrides pod Always", pod: podAlways, c: ctrPolicy(cNever), exit: 1},
		{name: "container Always overrides pod Never", pod: podNever, c: ctrPolicy(cAlways), exit: 0, want: true},
		{name: "container OnFailure in a Never pod restarts a failure", pod: podNever, c: ctrPolicy(cOnFailure), exit: 1, want: true},
		{name: "container OnFailure in an Always pod keeps a success", pod: podAlways, c: ctrPolicy(cOnFailure), exit: 0},
		{name: "a matching Restart rule restarts a Never container", pod: podNever, c: ctrPolicy(cNever, restartOn42), exit: 42, want: true},
		{name: "a rule that does not match leaves the container policy", pod: podAlways, c: ctrPolicy(cNever, restartOn42), exit: 1},
		{name: "NotIn matches codes outside the list", pod: podNever, c: ctrPolicy(cNever, restartNotIn01), exit: 3, want: true},
		{name: "NotIn does not match codes in the list", pod: podNever, c: ctrPolicy(cNever, restartNotIn01), exit: 1},
		{name: "a matching RestartAllContainers rule restarts the container", pod: podNever, c: ctrPolicy(cNever, restartAllOn42), exit: 42, want: true},
		{name: "RestartAllContainers rule of a sidecar", pod: podNever, c: ctrPolicy(cAlways, restartAllOn42), exit: 42, want: true},
		{name: "the first matching rule decides", pod: podNever, exit: 42, want: true,
			c: ctrPolicy(cNever, restartAllOn42, restartOn42)},
		{name: "rules are ignored without a container policy", pod: podNever, c: ctrPolicy("", restartOn42), exit: 42},
		{name: "a rule without exit codes never matches", pod: podNever, exit: 42,
			c: ctrPolicy(cNever, corev1.ContainerRestartRule{Action: corev1.ContainerRestartRuleActionRestart})},
		{name: "a rule with an unknown operator never matches", pod: podNever, exit: 42,
			c: ctrPolicy(cNever, rule(corev1.ContainerRestartRuleActionRestart, "Between", 42))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &corev1.PodSpec{RestartPolicy: tt.pod}
			if got := ContainerShouldRestart(tt.c, spec, tt.exit); got != tt.want {
				t.Errorf("ContainerShouldRestart = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestShouldContainerBeRestarted(t *testing.T) {
	never := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever}}
	deleted := never.DeepCopy()
	deleted.DeletionTimestamp = &metav1.Time{}
	c := ctrPolicy("", restartOn42)
	withRule := ctrPolicy(corev1.ContainerRestartPolicyNever, restartOn42)
	tests := []struct {
		name string
		pod  *corev1.Pod
		c    *corev1.Container
		last Attempt
		want bool
	}{
		{name: "never created: start it", pod: never, c: c, last: Attempt{State: NoAttempt}, want: true},
		{name: "created but not started: start it", pod: never, c: c, last: Attempt{State: AttemptCreated}, want: true},
		{name: "unknown: start it", pod: never, c: c, last: Attempt{State: AttemptUnknown}, want: true},
		{name: "running: leave it", pod: never, c: c, last: Attempt{State: AttemptRunning}},
		{name: "exited under pod Never", pod: never, c: c, last: Attempt{State: AttemptExited, ExitCode: 1}},
		{name: "exited matching a Restart rule", pod: never, c: withRule, last: Attempt{State: AttemptExited, ExitCode: 42}, want: true},
		{name: "a deleted pod starts nothing", pod: deleted, c: c, last: Attempt{State: NoAttempt}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShouldContainerBeRestarted(tt.pod, tt.c, tt.last); got != tt.want {
				t.Errorf("ShouldContainerBeRestarted = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRestartsAfterKill(t *testing.T) {
	tests := []struct {
		name string
		pod  corev1.RestartPolicy
		c    *corev1.Container
		want bool
	}{
		{name: "pod Always", pod: corev1.RestartPolicyAlways, c: ctrPolicy(""), want: true},
		{name: "pod OnFailure", pod: corev1.RestartPolicyOnFailure, c: ctrPolicy(""), want: true},
		{name: "pod Never", pod: corev1.RestartPolicyNever, c: ctrPolicy("")},
		{name: "container Never in an Always pod", pod: corev1.RestartPolicyAlways, c: ctrPolicy(corev1.ContainerRestartPolicyNever)},
		{name: "container Never with a Restart rule: rules need an exit code", pod: corev1.RestartPolicyAlways,
			c: ctrPolicy(corev1.ContainerRestartPolicyNever, restartOn42)},
		{name: "container OnFailure in a Never pod", pod: corev1.RestartPolicyNever, c: ctrPolicy(corev1.ContainerRestartPolicyOnFailure), want: true},
		{name: "sidecar in a Never pod", pod: corev1.RestartPolicyNever, c: ctrPolicy(corev1.ContainerRestartPolicyAlways), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RestartsAfterKill(tt.c, &corev1.PodSpec{RestartPolicy: tt.pod}); got != tt.want {
				t.Errorf("RestartsAfterKill = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRestartAllContainersRules(t *testing.T) {
	source := ctrPolicy(corev1.ContainerRestartPolicyNever, restartOn42, restartAllOn42)
	all := ctrPolicy(corev1.ContainerRestartPolicyNever, restartAllOn42)
	if TriggersRestartAll(source, 42) {
		t.Error("TriggersRestartAll: an earlier Restart rule matched first, want false")
	}
	if !TriggersRestartAll(all, 42) || TriggersRestartAll(all, 1) {
		t.Error("TriggersRestartAll: want true for 42 only")
	}
	tests := []struct {
		name string
		spec *corev1.PodSpec
		want bool
	}{
		{name: "nil spec"},
		{name: "no rules", spec: &corev1.PodSpec{Containers: []corev1.Container{*ctrPolicy("")}}},
		{name: "a RestartAllContainers rule after a Restart rule", spec: &corev1.PodSpec{Containers: []corev1.Container{*source}}, want: true},
		{name: "a regular container's rule", spec: &corev1.PodSpec{Containers: []corev1.Container{*all}}, want: true},
		{name: "an init container's rule", spec: &corev1.PodSpec{InitContainers: []corev1.Container{*all}}, want: true},
		{name: "a Restart rule is not enough",
			spec: &corev1.PodSpec{Containers: []corev1.Container{*ctrPolicy(corev1.ContainerRestartPolicyNever, restartOn42)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AllContainersCouldRestart(tt.spec); got != tt.want {
				t.Errorf("AllContainersCouldRestart = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsSidecar(t *testing.T) {
	for _, tt := range []struct {
		c    *corev1.Container
		want bool
	}{
		{c: nil}, {c: ctrPolicy("")}, {c: ctrPolicy(corev1.ContainerRestartPolicyNever)},
		{c: ctrPolicy(corev1.ContainerRestartPolicyOnFailure)}, {c: ctrPolicy(corev1.ContainerRestartPolicyAlways), want: true},
	} {
		if got := IsSidecar(tt.c); got != tt.want {
			t.Errorf("IsSidecar(%v) = %v, want %v", tt.c, got, tt.want)
		}
	}
}
