package podstatus

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// withEphemeral adds ephemeral containers, as `kubectl debug` does through pods/ephemeralcontainers.
func withEphemeral(p *corev1.Pod, names ...string) *corev1.Pod {
	for _, n := range names {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: n, Image: n + ":1"}, TargetContainerName: "app"})
	}
	return p
}

func TestComputeEphemeralContainerStatuses(t *testing.T) {
	running := func() *corev1.Pod {
		return withEphemeral(withStatus(newPod(corev1.RestartPolicyAlways, "app"), runningStatus("containerd://app-0")), "zdebug", "debugger")
	}
	t.Run("running and not yet created, by name, apart from the pod's containers", func(t *testing.T) {
		s := Compute(baseInput(running(), podRuntime(readySandbox("10.0.0.5"), runningAttempt("app", 0), runningAttempt("zdebug", 1))))
		if len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].Name != "app" {
			t.Fatalf("containerStatuses = %+v, want app only", s.ContainerStatuses)
		}
		if len(s.EphemeralContainerStatuses) != 2 {
			t.Fatalf("ephemeralContainerStatuses = %+v", s.EphemeralContainerStatuses)
		}
		waiting, run := s.EphemeralContainerStatuses[0], s.EphemeralContainerStatuses[1]
		if waiting.Name != "debugger" || waiting.State.Waiting == nil || waiting.State.Waiting.Reason != "ContainerCreating" {
			t.Errorf("debugger = %+v, want waiting ContainerCreating", waiting)
		}
		if run.Name != "zdebug" || run.State.Running == nil || run.ContainerID != "containerd://zdebug-1" || run.Image != "zdebug:1" {
			t.Errorf("zdebug = %+v, want running", run)
		}
		if run.Ready || run.Started != nil {
			t.Errorf("zdebug ready=%v started=%v: the kubelet's prober leaves ephemeral containers unready and unstarted", run.Ready, run.Started)
		}
		if s.Phase != corev1.PodRunning {
			t.Errorf("phase = %s", s.Phase)
		}
		checkConditions(t, s, []wantCondition{{t: corev1.PodReady, status: corev1.ConditionTrue}, {t: corev1.ContainersReady, status: corev1.ConditionTrue}})
	})
	t.Run("an exited ephemeral container changes neither the phase nor readiness", func(t *testing.T) {
		s := Compute(baseInput(running(), podRuntime(readySandbox("10.0.0.5"), runningAttempt("app", 0), exitedAttempt("zdebug", 1, 1, "Error"))))
		st := s.EphemeralContainerStatuses[1]
		if st.State.Terminated == nil || st.State.Terminated.ExitCode != 1 || st.State.Terminated.Reason != "Error" {
			t.Errorf("zdebug = %+v, want terminated with exit code 1", st.State)
		}
		if s.Phase != corev1.PodRunning {
			t.Errorf("phase = %s, want Running", s.Phase)
		}
		checkConditions(t, s, []wantCondition{{t: corev1.PodReady, status: corev1.ConditionTrue}})
	})
}
