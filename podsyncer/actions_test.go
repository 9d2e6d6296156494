package podsyncer

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

const sb1 = "sb1"

func testPod(policy corev1.RestartPolicy, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"},
		Spec: corev1.PodSpec{RestartPolicy: policy}}
	for _, n := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n, Image: "busybox"})
	}
	return p
}

func readySandbox() []*runtimeapi.PodSandboxStatus {
	return []*runtimeapi.PodSandboxStatus{{Id: sb1, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{Attempt: 0}}}
}

func ctr(pod *corev1.Pod, name string, state runtimeapi.ContainerState, exit int32, attempt int) *runtime.ContainerStatus {
	c := &runtime.ContainerStatus{ID: name + "-" + string(rune('0'+attempt)), Name: name, SandboxID: sb1, State: state,
		ExitCode: exit, RestartCount: attempt, CreatedAt: time.Unix(int64(100+attempt), 0)}
	if spec := containerSpec(pod, name); spec != nil {
		c.Hash = podconfig.HashContainer(spec)
	}
	if state == runtimeapi.ContainerState_CONTAINER_EXITED {
		c.FinishedAt = time.Unix(int64(200+attempt), 0)
	}
	return c
}

func names(starts []startAction) []string {
	var out []string
	for _, s := range starts {
		out = append(out, s.container.Name)
	}
	return out
}

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
)

func TestComputePodActions(t *testing.T) {
	always := testPod(corev1.RestartPolicyAlways, "a", "b")
	never := testPod(corev1.RestartPolicyNever, "a")
	onFailure := testPod(corev1.RestartPolicyOnFailure, "a")
	withInit := testPod(corev1.RestartPolicyAlways, "app")
	withInit.Spec.InitContainers = []corev1.Container{
		{Name: "i1", Image: "busybox"},
		{Name: "side", Image: "busybox", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
		{Name: "i2", Image: "busybox"},
	}
	changed := testPod(corev1.RestartPolicyAlways, "a")
	changedOld := ctr(changed, "a", running, 0, 0)
	changedOld.Hash = 42

	tests := []struct {
		name        string
		pod         *corev1.Pod
		sandboxes   []*runtimeapi.PodSandboxStatus
		containers  []*runtime.ContainerStatus
		wantSandbox bool
		wantStart   []string
		wantKill    int
		wantDone    bool
		wantInit    bool
		wantRestart int
	}{
		{name: "new pod creates its sandbox", pod: always, wantSandbox: true},
		{name: "ready sandbox starts every container", pod: always, sandboxes: readySandbox(),
			wantStart: []string{"a", "b"}, wantInit: true},
		{name: "running containers are left alone", pod: always, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(always, "a", running, 0, 0), ctr(always, "b", running, 0, 0)}, wantInit: true},
		{name: "Always restarts an exited container with the next attempt", pod: always, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(always, "a", exited, 0, 0), ctr(always, "b", running, 0, 0)},
			wantStart:  []string{"a"}, wantInit: true, wantRestart: 1},
		{name: "Never keeps an exited container and the pod is done", pod: never, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(never, "a", exited, 3, 0)}, wantInit: true, wantDone: true},
		{name: "OnFailure restarts a failure", pod: onFailure, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(onFailure, "a", exited, 1, 2)}, wantStart: []string{"a"}, wantInit: true, wantRestart: 3},
		{name: "OnFailure keeps a success and the pod is done", pod: onFailure, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(onFailure, "a", exited, 0, 0)}, wantInit: true, wantDone: true},
		{name: "a dead sandbox with running containers kills them first", pod: always,
			sandboxes:  []*runtimeapi.PodSandboxStatus{{Id: sb1, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, Metadata: &runtimeapi.PodSandboxMetadata{}}},
			containers: []*runtime.ContainerStatus{ctr(always, "a", running, 0, 0)}, wantKill: 1},
		{name: "a dead sandbox of a Never pod that ran is not recreated", pod: never,
			sandboxes:  []*runtimeapi.PodSandboxStatus{{Id: sb1, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, Metadata: &runtimeapi.PodSandboxMetadata{}}},
			containers: []*runtime.ContainerStatus{ctr(never, "a", exited, 0, 0)}, wantDone: true, wantInit: true},
		{name: "init containers start first, one at a time", pod: withInit, sandboxes: readySandbox(),
			wantStart: []string{"i1"}},
		{name: "a running init container is waited for", pod: withInit, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(withInit, "i1", running, 0, 0)}},
		{name: "a sidecar starts after the init container before it succeeded", pod: withInit, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(withInit, "i1", exited, 0, 0)}, wantStart: []string{"side"}},
		{name: "the next init container starts once the sidecar runs", pod: withInit, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(withInit, "i1", exited, 0, 0), ctr(withInit, "side", running, 0, 0)},
			wantStart:  []string{"i2"}},
		{name: "a failed init container restarts under Always", pod: withInit, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(withInit, "i1", exited, 1, 0)}, wantStart: []string{"i1"}, wantRestart: 1},
		{name: "after init the app starts and the sidecar keeps running", pod: withInit, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(withInit, "i1", exited, 0, 0), ctr(withInit, "side", running, 0, 0),
				ctr(withInit, "i2", exited, 0, 0)}, wantStart: []string{"app"}, wantInit: true},
		{name: "an exited sidecar of an initialized pod is restarted", pod: withInit, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(withInit, "side", exited, 1, 0), ctr(withInit, "app", running, 0, 0)},
			wantStart:  []string{"side"}, wantInit: true, wantRestart: 1},
		{name: "a changed container definition is killed", pod: changed, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{changedOld}, wantKill: 1, wantInit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &runtime.PodStatus{UID: "uid", Sandboxes: tt.sandboxes, Containers: tt.containers}
			a := computePodActions(tt.pod, st, nil, false)
			if a.createSandbox != tt.wantSandbox {
				t.Errorf("createSandbox = %v, want %v", a.createSandbox, tt.wantSandbox)
			}
			if got := names(a.start); !equalStrings(got, tt.wantStart) {
				t.Errorf("start = %v, want %v", got, tt.wantStart)
			}
			if len(a.kill) != tt.wantKill {
				t.Errorf("kill = %d, want %d", len(a.kill), tt.wantKill)
			}
			if a.done != tt.wantDone {
				t.Errorf("done = %v, want %v", a.done, tt.wantDone)
			}
			if a.initialized != tt.wantInit {
				t.Errorf("initialized = %v, want %v", a.initialized, tt.wantInit)
			}
			if tt.wantRestart > 0 && (len(a.start) == 0 || a.start[0].restartCount != tt.wantRestart) {
				t.Errorf("restartCount = %+v, want %d", a.start, tt.wantRestart)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
