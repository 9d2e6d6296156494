package podstatus

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/runtime"
)

var restartAllOn42 = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
	ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}

func containerPolicy(p *corev1.Pod, name string, policy corev1.ContainerRestartPolicy, rules []corev1.ContainerRestartRule) *corev1.Pod {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			p.Spec.Containers[i].RestartPolicy = ptr.To(policy)
			p.Spec.Containers[i].RestartPolicyRules = rules
		}
	}
	return p
}

// TestComputePhaseWithContainerRestartPolicies: a container's own restartPolicy decides whether its exit
// leaves the pod running (it restarts) or ends it.
func TestComputePhaseWithContainerRestartPolicies(t *testing.T) {
	sb := readySandbox("10.0.0.5")
	tests := []struct {
		name string
		pod  *corev1.Pod
		rt   *runtime.PodStatus
		want corev1.PodPhase
	}{
		{name: "container Never in an Always pod fails with its exit",
			pod:  containerPolicy(newPod(corev1.RestartPolicyAlways, "a"), "a", corev1.ContainerRestartPolicyNever, nil),
			rt:   podRuntime(sb, exitedAttempt("a", 0, 1, "Error")),
			want: corev1.PodFailed},
		{name: "container Always in a Never pod keeps it running after an exit",
			pod:  containerPolicy(newPod(corev1.RestartPolicyNever, "a"), "a", corev1.ContainerRestartPolicyAlways, nil),
			rt:   podRuntime(sb, exitedAttempt("a", 0, 1, "Error")),
			want: corev1.PodRunning},
		{name: "container OnFailure in a Never pod keeps it running after a failure",
			pod:  containerPolicy(newPod(corev1.RestartPolicyNever, "a"), "a", corev1.ContainerRestartPolicyOnFailure, nil),
			rt:   podRuntime(sb, exitedAttempt("a", 0, 1, "Error")),
			want: corev1.PodRunning},
		{name: "container OnFailure in a Never pod succeeds with its success",
			pod:  containerPolicy(newPod(corev1.RestartPolicyNever, "a"), "a", corev1.ContainerRestartPolicyOnFailure, nil),
			rt:   podRuntime(sb, exitedAttempt("a", 1, 0, "Completed")),
			want: corev1.PodSucceeded},
		{name: "an exit that fires RestartAllContainers keeps a Never pod running",
			pod:  containerPolicy(newPod(corev1.RestartPolicyNever, "a"), "a", corev1.ContainerRestartPolicyNever, restartAllOn42),
			rt:   podRuntime(sb, exitedAttempt("a", 0, 42, "Error")),
			want: corev1.PodRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder(baseInput(tt.pod, tt.rt))
			if got := b.generate().Phase; got != tt.want {
				t.Errorf("phase = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestAllContainersRestarting(t *testing.T) {
	sb := readySandbox("10.0.0.5")
	source := func() *corev1.Pod {
		return containerPolicy(newPod(corev1.RestartPolicyNever, "source", "regular"), "source",
			corev1.ContainerRestartPolicyNever, restartAllOn42)
	}
	restarting := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.AllContainersRestarting, Status: corev1.ConditionTrue}}}
	tests := []struct {
		name string
		pod  *corev1.Pod
		rt   *runtime.PodStatus
		want bool
	}{
		{name: "no RestartAllContainers rule", pod: newPod(corev1.RestartPolicyNever, "a"),
			rt: podRuntime(sb, exitedAttempt("a", 0, 42, "Error"))},
		{name: "the exit fires the rule while another container runs", pod: source(), want: true,
			rt: podRuntime(sb, exitedAttempt("source", 0, 42, "Error"), runningAttempt("regular", 0))},
		{name: "an exit that does not match", pod: source(),
			rt: podRuntime(sb, exitedAttempt("source", 0, 1, "Error"), runningAttempt("regular", 0))},
		{name: "the old status says it is under way and containers are left", pod: withStatus(source(), restarting), want: true,
			rt: podRuntime(sb, runningAttempt("regular", 0))},
		{name: "every container is gone: the restart is over", pod: withStatus(source(), restarting),
			rt: podRuntime(sb)},
		{name: "an exit recorded in the old status fires it", want: true,
			pod: withStatus(source(), corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
				{Name: "source", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 42}}}}}),
			rt: podRuntime(sb, runningAttempt("regular", 0))},
		{name: "a pod whose phase is terminal does not restart", pod: withStatus(source(), corev1.PodStatus{Phase: corev1.PodFailed}),
			rt: podRuntime(sb, exitedAttempt("source", 0, 42, "Error"), attempt("regular", 0, runtimeapi.ContainerState_CONTAINER_EXITED))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Compute(baseInput(tt.pod, tt.rt))
			if got := AllContainersRestarting(&s); got != tt.want {
				t.Errorf("AllContainersRestarting = %v, want %v", got, tt.want)
			}
		})
	}
}
