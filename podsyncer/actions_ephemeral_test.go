package podsyncer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
)

// withDebugger adds the ephemeral container "debugger" targeting "a", as `kubectl debug --target=a`.
func withDebugger(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"},
		TargetContainerName:      "a",
	})
	return p
}

func TestComputePodActionsEphemeralContainers(t *testing.T) {
	always := withDebugger(testPod(corev1.RestartPolicyAlways, "a"))
	never := withDebugger(testPod(corev1.RestartPolicyNever, "a"))
	initializing := withDebugger(testPod(corev1.RestartPolicyAlways, "a"))
	initializing.Spec.InitContainers = []corev1.Container{{Name: "i1", Image: "busybox"}}
	oldSandbox := &runtimeapi.PodSandboxStatus{Id: "sb0", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		Metadata: &runtimeapi.PodSandboxMetadata{}}
	inOldSandbox := func(c *runtime.ContainerStatus) *runtime.ContainerStatus { c.SandboxID = "sb0"; return c }

	tests := []struct {
		name       string
		pod        *corev1.Pod
		sandboxes  []*runtimeapi.PodSandboxStatus
		containers []*runtime.ContainerStatus
		wantStart  []string
		wantDone   bool
	}{{
		name: "added to a running pod: started", pod: always, sandboxes: readySandbox(),
		containers: []*runtime.ContainerStatus{ctr(always, "a", running, 0, 0)},
		wantStart:  []string{"debugger"},
	}, {
		name: "running: nothing to do", pod: always, sandboxes: readySandbox(),
		containers: []*runtime.ContainerStatus{ctr(always, "a", running, 0, 0), ctr(always, "debugger", running, 0, 0)},
	}, {
		name: "exited: never restarted, whatever the pod's policy", pod: always, sandboxes: readySandbox(),
		containers: []*runtime.ContainerStatus{ctr(always, "a", running, 0, 0), ctr(always, "debugger", exited, 1, 0)},
	}, {
		name: "ran in an earlier sandbox: not started again", pod: always,
		sandboxes:  append(readySandbox(), oldSandbox),
		containers: []*runtime.ContainerStatus{ctr(always, "a", running, 0, 1), inOldSandbox(ctr(always, "debugger", exited, 137, 0))},
	}, {
		name: "started while the pod still initializes, before the init container", pod: initializing, sandboxes: readySandbox(),
		containers: []*runtime.ContainerStatus{ctr(initializing, "i1", running, 0, 0)},
		wantStart:  []string{"debugger"},
	}, {
		name: "not started once the pod's work is done", pod: never, sandboxes: readySandbox(),
		containers: []*runtime.ContainerStatus{ctr(never, "a", exited, 0, 0)},
		wantDone:   true,
	}, {
		name: "no sandbox: the sandbox comes first", pod: always,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &runtime.PodStatus{UID: "uid", Sandboxes: tt.sandboxes, Containers: tt.containers}
			a := computePodActions(tt.pod, st, nil, false)
			if got := names(a.start); !equalStrings(got, tt.wantStart) {
				t.Errorf("start = %v, want %v", got, tt.wantStart)
			}
			if a.done != tt.wantDone {
				t.Errorf("done = %v, want %v", a.done, tt.wantDone)
			}
			for _, s := range a.start {
				if s.container.Name == "debugger" && (s.kind != runtime.KindEphemeral || s.target != "a" || s.restartCount != 0 || s.lastExit != nil) {
					t.Errorf("ephemeral start = kind %v target %q restart %d, want an ephemeral first start targeting a", s.kind, s.target, s.restartCount)
				}
			}
		})
	}
}

func TestTargetContainerID(t *testing.T) {
	st := &runtime.PodStatus{Containers: []*runtime.ContainerStatus{{ID: "new", Name: "a"}, {ID: "old", Name: "a"}}}
	if id, err := targetContainerID(startAction{target: "a"}, st); err != nil || id != "new" {
		t.Errorf("target a = %q, %v; want the newest attempt", id, err)
	}
	if id, err := targetContainerID(startAction{}, st); err != nil || id != "" {
		t.Errorf("no target = %q, %v", id, err)
	}
	_, err := targetContainerID(startAction{target: "gone"}, st)
	if err == nil || err.Error() != "unable to find target container gone" {
		t.Errorf("missing target: %v, want the kubelet's message", err)
	}
}
