package podstatus

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
)

var (
	t0        = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	now       = t0.Add(time.Hour).Add(123 * time.Millisecond) // truncated to the second in statuses
	nowAPI    = metav1.NewTime(t0.Add(time.Hour))
	scheduled = metav1.NewTime(t0.Add(-time.Minute))
)

// newPod is a scheduled pod as the API holds it before the node touched it.
func newPod(restart corev1.RestartPolicy, containers ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1", Generation: 1},
		Spec:       corev1.PodSpec{RestartPolicy: restart, NodeName: "node-1"},
		Status: corev1.PodStatus{
			Phase:      corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: scheduled}},
			QOSClass:   corev1.PodQOSBestEffort,
		},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: c + ":1"})
	}
	return p
}

func withInit(p *corev1.Pod, sidecar bool, names ...string) *corev1.Pod {
	for _, n := range names {
		c := corev1.Container{Name: n, Image: n + ":1"}
		if sidecar {
			always := corev1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
			c.StartupProbe = &corev1.Probe{}
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
	return p
}

// withStatus records s as the pod's old status.
func withStatus(p *corev1.Pod, s corev1.PodStatus) *corev1.Pod {
	p.Status = s
	return p
}

func readySandbox(ip string) *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{
		Id: "sb-1", State: runtimeapi.PodSandboxState_SANDBOX_READY, Metadata: &runtimeapi.PodSandboxMetadata{},
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: ip},
	}
}

func hostNetworkSandbox() *runtimeapi.PodSandboxStatus {
	sb := readySandbox("")
	sb.Linux = &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}}
	return sb
}

func podRuntime(sb *runtimeapi.PodSandboxStatus, containers ...*runtime.ContainerStatus) *runtime.PodStatus {
	s := &runtime.PodStatus{UID: "uid-1", Name: "web", Namespace: "default", Containers: containers}
	if sb != nil {
		s.Sandboxes = []*runtimeapi.PodSandboxStatus{sb}
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY && sb.Network.Ip != "" {
			s.IPs = []string{sb.Network.Ip}
		}
	}
	return s
}

func attempt(name string, n int, state runtimeapi.ContainerState) *runtime.ContainerStatus {
	created := t0.Add(time.Duration(n) * time.Minute)
	c := &runtime.ContainerStatus{
		ID: fmt.Sprintf("%s-%d", name, n), Name: name, SandboxID: "sb-1", State: state, CreatedAt: created,
		Image: name + ":1", ImageRef: "docker.io/library/" + name + "@sha256:abc", RestartCount: n,
	}
	if state != runtimeapi.ContainerState_CONTAINER_CREATED {
		c.StartedAt = created.Add(time.Second)
	}
	return c
}

func runningAttempt(name string, n int) *runtime.ContainerStatus {
	return attempt(name, n, runtimeapi.ContainerState_CONTAINER_RUNNING)
}

func exitedAttempt(name string, n int, code int32, reason string) *runtime.ContainerStatus {
	c := attempt(name, n, runtimeapi.ContainerState_CONTAINER_EXITED)
	c.ExitCode, c.Reason, c.FinishedAt = code, reason, c.StartedAt.Add(10*time.Second)
	return c
}

func baseInput(p *corev1.Pod, rt *runtime.PodStatus) Input {
	return Input{Pod: p, Runtime: rt, HostIPs: []string{"192.168.1.10"}, Now: now}
}

func condition(s corev1.PodStatus, t corev1.PodConditionType) corev1.PodCondition {
	if c := findCondition(s.Conditions, t); c != nil {
		return *c
	}
	return corev1.PodCondition{}
}

type wantCondition struct {
	t                       corev1.PodConditionType
	status                  corev1.ConditionStatus
	reason, message         string
	lastTransitionTimeIsNow bool
}

func checkConditions(t *testing.T, s corev1.PodStatus, want []wantCondition) {
	t.Helper()
	for _, w := range want {
		c := condition(s, w.t)
		if c.Status != w.status || c.Reason != w.reason || c.Message != w.message {
			t.Errorf("condition %s = %s/%q/%q, want %s/%q/%q", w.t, c.Status, c.Reason, c.Message, w.status, w.reason, w.message)
		}
		if w.lastTransitionTimeIsNow && !c.LastTransitionTime.Equal(&nowAPI) {
			t.Errorf("condition %s changed at %v, want now", w.t, c.LastTransitionTime)
		}
	}
}

func checkState(t *testing.T, what string, got, want corev1.ContainerState) {
	t.Helper()
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("%s = %+v, want %+v", what, describe(got), describe(want))
	}
}

func describe(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return fmt.Sprintf("waiting{%s %q}", s.Waiting.Reason, s.Waiting.Message)
	case s.Running != nil:
		return fmt.Sprintf("running{%v}", s.Running.StartedAt)
	case s.Terminated != nil:
		t := s.Terminated
		return fmt.Sprintf("terminated{%d %s %q %v..%v %s}", t.ExitCode, t.Reason, t.Message, t.StartedAt, t.FinishedAt, t.ContainerID)
	}
	return "none"
}

func waiting(reason, message string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
}

func runningState(a *runtime.ContainerStatus) corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(a.StartedAt)}}
}

func terminatedState(a *runtime.ContainerStatus, reason string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: a.ExitCode, Reason: reason, Message: a.Message, StartedAt: metav1.NewTime(a.StartedAt),
		FinishedAt: metav1.NewTime(a.FinishedAt), ContainerID: "containerd://" + a.ID,
	}}
}

type wantContainer struct {
	name         string
	state        corev1.ContainerState
	last         corev1.ContainerState
	ready        bool
	started      bool
	restartCount int32
}

func checkContainers(t *testing.T, what string, got []corev1.ContainerStatus, want []wantContainer) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d statuses, want %d: %+v", what, len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name {
			t.Errorf("%s[%d] is %s, want %s", what, i, g.Name, w.name)
		}
		checkState(t, w.name+" state", g.State, w.state)
		checkState(t, w.name+" lastState", g.LastTerminationState, w.last)
		if g.Ready != w.ready || g.Started == nil || *g.Started != w.started || g.RestartCount != w.restartCount {
			t.Errorf("%s: ready=%v started=%v restarts=%d, want %v %v %d", w.name, g.Ready, derefBool(g.Started), g.RestartCount, w.ready, w.started, w.restartCount)
		}
	}
}

func derefBool(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

func TestComputePendingAndRunningPods(t *testing.T) {
	app0 := runningAttempt("app", 0)
	init0 := runningAttempt("init1", 0)
	proxy0 := runningAttempt("proxy", 0)
	tests := []struct {
		name       string
		in         Input
		phase      corev1.PodPhase
		containers []wantContainer
		inits      []wantContainer
		conditions []wantCondition
	}{{
		name:       "brand-new pod waits for its sandbox",
		in:         baseInput(newPod(corev1.RestartPolicyAlways, "app"), nil),
		phase:      corev1.PodPending,
		containers: []wantContainer{{name: "app", state: waiting("ContainerCreating", "")}},
		conditions: []wantCondition{
			{t: corev1.PodReadyToStartContainers, status: corev1.ConditionFalse, reason: "PodSandboxNotReady", message: "no pod sandbox exists", lastTransitionTimeIsNow: true},
			{t: corev1.PodInitialized, status: corev1.ConditionTrue},
			{t: corev1.PodReady, status: corev1.ConditionFalse, reason: "ContainersNotReady", message: "containers with unready status: [app]"},
			{t: corev1.ContainersReady, status: corev1.ConditionFalse, reason: "ContainersNotReady", message: "containers with unready status: [app]"},
			{t: corev1.PodScheduled, status: corev1.ConditionTrue},
		},
	}, {
		name:       "ready sandbox and running containers",
		in:         baseInput(newPod(corev1.RestartPolicyAlways, "app"), podRuntime(readySandbox("10.0.0.5"), app0)),
		phase:      corev1.PodRunning,
		containers: []wantContainer{{name: "app", state: runningState(app0), ready: true, started: true}},
		conditions: []wantCondition{
			{t: corev1.PodReadyToStartContainers, status: corev1.ConditionTrue},
			{t: corev1.PodInitialized, status: corev1.ConditionTrue},
			{t: corev1.PodReady, status: corev1.ConditionTrue},
			{t: corev1.ContainersReady, status: corev1.ConditionTrue},
		},
	}, {
		name:  "init containers run in order",
		in:    baseInput(withInit(newPod(corev1.RestartPolicyAlways, "app"), false, "init1", "init2"), podRuntime(readySandbox("10.0.0.5"), init0)),
		phase: corev1.PodPending,
		inits: []wantContainer{
			{name: "init1", state: runningState(init0), started: true},
			{name: "init2", state: waiting("PodInitializing", "")},
		},
		containers: []wantContainer{{name: "app", state: waiting("PodInitializing", "")}},
		conditions: []wantCondition{
			{t: corev1.PodInitialized, status: corev1.ConditionFalse, reason: "ContainersNotInitialized", message: "containers with incomplete status: [init1 init2]"},
			{t: corev1.PodReady, status: corev1.ConditionFalse, reason: "ContainersNotReady", message: "containers with unready status: [app]"},
		},
	}, {
		name: "sidecar not started yet gates initialization",
		in: withProbes(baseInput(withInit(newPod(corev1.RestartPolicyAlways, "app"), true, "proxy"), podRuntime(readySandbox("10.0.0.5"), proxy0)),
			map[string]bool{}, map[string]bool{}),
		phase:      corev1.PodPending,
		inits:      []wantContainer{{name: "proxy", state: runningState(proxy0)}},
		containers: []wantContainer{{name: "app", state: waiting("PodInitializing", "")}},
		conditions: []wantCondition{
			{t: corev1.PodInitialized, status: corev1.ConditionFalse, reason: "ContainersNotInitialized", message: "containers with incomplete status: [proxy]"},
			{t: corev1.ContainersReady, status: corev1.ConditionFalse, reason: "ContainersNotReady", message: "containers with unready status: [proxy app]"},
		},
	}, {
		name: "started sidecar initializes the pod and counts for readiness",
		in: withProbes(baseInput(withInit(newPod(corev1.RestartPolicyAlways, "app"), true, "proxy"), podRuntime(readySandbox("10.0.0.5"), proxy0, app0)),
			map[string]bool{"proxy-0": true}, map[string]bool{"proxy-0": false, "app-0": true}),
		phase:      corev1.PodRunning,
		inits:      []wantContainer{{name: "proxy", state: runningState(proxy0), started: true}},
		containers: []wantContainer{{name: "app", state: runningState(app0), ready: true, started: true}},
		conditions: []wantCondition{
			{t: corev1.PodInitialized, status: corev1.ConditionTrue},
			{t: corev1.ContainersReady, status: corev1.ConditionFalse, reason: "ContainersNotReady", message: "containers with unready status: [proxy]"},
		},
	}, {
		name: "image pull error shows while waiting",
		in: withWaiting(baseInput(newPod(corev1.RestartPolicyAlways, "app"), podRuntime(readySandbox("10.0.0.5"))),
			"app", Waiting{Reason: "ErrImagePull", Message: "pull failed"}),
		phase:      corev1.PodPending,
		containers: []wantContainer{{name: "app", state: waiting("ErrImagePull", "pull failed")}},
	}, {
		name: "image pull back-off shows while waiting",
		in: withWaiting(baseInput(newPod(corev1.RestartPolicyAlways, "app"), podRuntime(readySandbox("10.0.0.5"))),
			"app", Waiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "app:1"`}),
		phase:      corev1.PodPending,
		containers: []wantContainer{{name: "app", state: waiting("ImagePullBackOff", `Back-off pulling image "app:1"`)}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Compute(tt.in)
			if s.Phase != tt.phase {
				t.Errorf("phase = %s, want %s", s.Phase, tt.phase)
			}
			checkContainers(t, "containerStatuses", s.ContainerStatuses, tt.containers)
			checkContainers(t, "initContainerStatuses", s.InitContainerStatuses, tt.inits)
			checkConditions(t, s, tt.conditions)
		})
	}
}

func withProbes(in Input, started, ready map[string]bool) Input {
	in.Started = func(id string) (bool, bool) { v, ok := started[id]; return v, ok }
	in.Ready = func(id string) (bool, bool) { v, ok := ready[id]; return v, ok }
	return in
}

func withWaiting(in Input, name string, w Waiting) Input {
	if in.Waiting == nil {
		in.Waiting = map[string]Waiting{}
	}
	in.Waiting[name] = w
	return in
}

func terminated(in Input) Input {
	in.Terminated, in.Terminating = true, true
	in.Runtime.Sandboxes[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	in.Runtime.IPs = nil
	return in
}

// runningStatus is the old status of a running single-container pod.
func runningStatus(containerID string) corev1.PodStatus {
	started, start := true, metav1.NewTime(t0)
	return corev1.PodStatus{
		Phase:     corev1.PodRunning,
		StartTime: &start,
		PodIPs:    []corev1.PodIP{{IP: "10.0.0.5"}},
		PodIP:     "10.0.0.5",
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: scheduled},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", Ready: true, Started: &started, ContainerID: containerID,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}},
		}},
		QOSClass: corev1.PodQOSBestEffort,
	}
}

func TestComputeExitsAndTerminalPhases(t *testing.T) {
	ok0 := exitedAttempt("app", 0, 0, "Completed")
	fail0 := exitedAttempt("app", 0, 3, "")
	fail1 := exitedAttempt("app", 1, 1, "Error")
	oom0 := exitedAttempt("app", 0, 137, "OOMKilled")
	crashMsg := "back-off 10s restarting failed container=app pod=default/web(uid-1)"
	running := func(p corev1.RestartPolicy) *corev1.Pod {
		return withStatus(newPod(p, "app"), runningStatus("containerd://app-0"))
	}
	tests := []struct {
		name       string
		in         Input
		phase      corev1.PodPhase
		localPhase corev1.PodPhase
		container  wantContainer
		conditions []wantCondition
	}{{
		name:       "Never pod exiting 0 succeeds once terminated",
		in:         terminated(baseInput(running(corev1.RestartPolicyNever), podRuntime(readySandbox("10.0.0.5"), ok0))),
		phase:      corev1.PodSucceeded,
		localPhase: corev1.PodSucceeded,
		container:  wantContainer{name: "app", state: terminatedState(ok0, "Completed")},
		conditions: []wantCondition{
			{t: corev1.PodReady, status: corev1.ConditionFalse, reason: "PodCompleted", lastTransitionTimeIsNow: true},
			{t: corev1.ContainersReady, status: corev1.ConditionFalse, reason: "PodCompleted"},
			{t: corev1.PodInitialized, status: corev1.ConditionTrue, reason: "PodCompleted"},
			{t: corev1.PodReadyToStartContainers, status: corev1.ConditionFalse, reason: "PodSandboxNotReady", message: "pod sandbox is not ready"},
		},
	}, {
		name:       "terminal phase is withheld while the sandbox may still run",
		in:         baseInput(running(corev1.RestartPolicyNever), podRuntime(readySandbox("10.0.0.5"), ok0)),
		phase:      corev1.PodRunning,
		localPhase: corev1.PodSucceeded,
		container:  wantContainer{name: "app", state: terminatedState(ok0, "Completed")},
	}, {
		name:       "Never pod exiting 3 fails with reason Error",
		in:         terminated(baseInput(running(corev1.RestartPolicyNever), podRuntime(readySandbox("10.0.0.5"), fail0))),
		phase:      corev1.PodFailed,
		localPhase: corev1.PodFailed,
		container:  wantContainer{name: "app", state: terminatedState(fail0, "Error")},
		conditions: []wantCondition{{t: corev1.PodReady, status: corev1.ConditionFalse, reason: "PodFailed"}},
	}, {
		name:       "OnFailure pod restarts a failed container",
		in:         baseInput(running(corev1.RestartPolicyOnFailure), podRuntime(readySandbox("10.0.0.5"), fail0)),
		phase:      corev1.PodRunning,
		localPhase: corev1.PodRunning,
		container:  wantContainer{name: "app", state: terminatedState(fail0, "Error")},
	}, {
		name:       "OnFailure pod exiting 0 succeeds",
		in:         terminated(baseInput(running(corev1.RestartPolicyOnFailure), podRuntime(readySandbox("10.0.0.5"), ok0))),
		phase:      corev1.PodSucceeded,
		localPhase: corev1.PodSucceeded,
		container:  wantContainer{name: "app", state: terminatedState(ok0, "Completed")},
	}, {
		name: "crash loop waits with the last termination and the restart count",
		in: withWaiting(baseInput(running(corev1.RestartPolicyAlways), podRuntime(readySandbox("10.0.0.5"), fail1, fail0)),
			"app", Waiting{Reason: "CrashLoopBackOff", Message: crashMsg}),
		phase:      corev1.PodRunning,
		localPhase: corev1.PodRunning,
		container:  wantContainer{name: "app", state: waiting("CrashLoopBackOff", crashMsg), last: terminatedState(fail1, "Error"), restartCount: 1},
		conditions: []wantCondition{{t: corev1.PodReady, status: corev1.ConditionFalse, reason: "ContainersNotReady", message: "containers with unready status: [app]", lastTransitionTimeIsNow: true}},
	}, {
		name:       "exited container without a waiting reason shows terminated until restarted",
		in:         baseInput(running(corev1.RestartPolicyAlways), podRuntime(readySandbox("10.0.0.5"), fail1, fail0)),
		phase:      corev1.PodRunning,
		localPhase: corev1.PodRunning,
		container:  wantContainer{name: "app", state: terminatedState(fail1, "Error"), last: terminatedState(fail0, "Error"), restartCount: 1},
	}, {
		name:       "OOMKilled",
		in:         terminated(baseInput(running(corev1.RestartPolicyNever), podRuntime(readySandbox("10.0.0.5"), oom0))),
		phase:      corev1.PodFailed,
		localPhase: corev1.PodFailed,
		container:  wantContainer{name: "app", state: terminatedState(oom0, "OOMKilled")},
	}, {
		name: "a terminal phase never changes",
		in: baseInput(withStatus(newPod(corev1.RestartPolicyAlways, "app"), corev1.PodStatus{Phase: corev1.PodSucceeded, Reason: "Done"}),
			podRuntime(readySandbox("10.0.0.5"), runningAttempt("app", 0))),
		phase:      corev1.PodSucceeded,
		localPhase: corev1.PodSucceeded,
		container:  wantContainer{name: "app", state: runningState(runningAttempt("app", 0)), ready: true, started: true},
	}, {
		name:       "deleted Always pod whose containers were killed fails",
		in:         terminated(baseInput(deleted(running(corev1.RestartPolicyAlways)), podRuntime(readySandbox("10.0.0.5"), exitedAttempt("app", 0, 137, "Error")))),
		phase:      corev1.PodFailed,
		localPhase: corev1.PodFailed,
		container:  wantContainer{name: "app", state: terminatedState(exitedAttempt("app", 0, 137, "Error"), "Error")},
	}, {
		name:       "deleted Always pod whose containers exited 0 succeeds",
		in:         terminated(baseInput(deleted(running(corev1.RestartPolicyAlways)), podRuntime(readySandbox("10.0.0.5"), ok0))),
		phase:      corev1.PodSucceeded,
		localPhase: corev1.PodSucceeded,
		container:  wantContainer{name: "app", state: terminatedState(ok0, "Completed")},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Compute(tt.in)
			if s.Phase != tt.phase {
				t.Errorf("phase = %s, want %s", s.Phase, tt.phase)
			}
			if p := LocalPhase(tt.in); p != tt.localPhase {
				t.Errorf("local phase = %s, want %s", p, tt.localPhase)
			}
			checkContainers(t, "containerStatuses", s.ContainerStatuses, []wantContainer{tt.container})
			checkConditions(t, s, tt.conditions)
		})
	}
}

func deleted(p *corev1.Pod) *corev1.Pod {
	ts := metav1.NewTime(t0.Add(30 * time.Minute))
	p.DeletionTimestamp = &ts
	return p
}

func TestComputeContainerDetails(t *testing.T) {
	t.Run("identity, image and termination message", func(t *testing.T) {
		a := exitedAttempt("app", 0, 1, "Error")
		a.Message = "runtime says"
		in := baseInput(newPod(corev1.RestartPolicyNever, "app"), podRuntime(readySandbox("10.0.0.5"), a))
		in.RuntimeName = "cri-o"
		in.TerminationMessage = func(c *runtime.ContainerStatus) string { return "app says " + c.ID }
		s := Compute(in)
		cs := s.ContainerStatuses[0]
		if cs.ContainerID != "cri-o://app-0" || cs.Image != "app:1" || cs.ImageID != "docker.io/library/app@sha256:abc" {
			t.Errorf("identity = %s %s %s", cs.ContainerID, cs.Image, cs.ImageID)
		}
		if got := cs.State.Terminated.Message; got != "runtime says: app says app-0" {
			t.Errorf("message = %q", got)
		}
	})
	t.Run("regular statuses are sorted by name, init statuses kept in spec order", func(t *testing.T) {
		p := withInit(newPod(corev1.RestartPolicyAlways, "zeta", "alpha"), false, "second", "first")
		s := Compute(baseInput(p, nil))
		if s.ContainerStatuses[0].Name != "alpha" || s.InitContainerStatuses[0].Name != "second" {
			t.Errorf("order = %s,%s / %s,%s", s.ContainerStatuses[0].Name, s.ContainerStatuses[1].Name, s.InitContainerStatuses[0].Name, s.InitContainerStatuses[1].Name)
		}
	})
	t.Run("created but not started container waits without a reason", func(t *testing.T) {
		s := Compute(baseInput(newPod(corev1.RestartPolicyAlways, "app"), podRuntime(readySandbox("10.0.0.5"), attempt("app", 0, runtimeapi.ContainerState_CONTAINER_CREATED))))
		checkState(t, "state", s.ContainerStatuses[0].State, waiting("", ""))
	})
	t.Run("resources of a created container come from the spec", func(t *testing.T) {
		p := newPod(corev1.RestartPolicyAlways, "app")
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
		s := Compute(baseInput(p, podRuntime(readySandbox("10.0.0.5"), runningAttempt("app", 0))))
		cs := s.ContainerStatuses[0]
		if cs.Resources == nil || !cs.Resources.Requests.Cpu().Equal(resource.MustParse("100m")) || !cs.AllocatedResources.Cpu().Equal(resource.MustParse("100m")) {
			t.Errorf("resources = %v, allocated = %v", cs.Resources, cs.AllocatedResources)
		}
		if got := s.AllocatedResources.Cpu(); !got.Equal(resource.MustParse("100m")) {
			t.Errorf("pod allocatedResources cpu = %v", got)
		}
	})
}

// Containers the runtime no longer has keep what the old status knew about them.
func TestComputeLostContainers(t *testing.T) {
	t.Run("a larger old restart count is kept", func(t *testing.T) {
		old := runningStatus("containerd://app-old")
		old.ContainerStatuses[0].RestartCount = 5
		s := Compute(baseInput(withStatus(newPod(corev1.RestartPolicyAlways, "app"), old), podRuntime(readySandbox("10.0.0.5"), runningAttempt("app", 2))))
		if got := s.ContainerStatuses[0].RestartCount; got != 5 {
			t.Errorf("restartCount = %d, want 5", got)
		}
	})
	t.Run("a running container that vanished is counted as a lost restart", func(t *testing.T) {
		s := Compute(baseInput(withStatus(newPod(corev1.RestartPolicyAlways, "app"), runningStatus("containerd://app-0")), nil))
		want := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "ContainerStatusUnknown",
			Message: "The container could not be located when the pod was deleted.  The container used to be Running",
		}}
		checkContainers(t, "containerStatuses", s.ContainerStatuses, []wantContainer{{name: "app", state: waiting("ContainerCreating", ""), last: want, restartCount: 1}})
		if s.Phase != corev1.PodRunning || s.PodIP != "10.0.0.5" {
			t.Errorf("phase %s podIP %q, want Running with the old IP", s.Phase, s.PodIP)
		}
	})
	t.Run("a pod terminated before initializing reports its first init container lost", func(t *testing.T) {
		p := withInit(newPod(corev1.RestartPolicyAlways, "app"), false, "init1", "init2")
		in := terminated(baseInput(p, podRuntime(readySandbox("10.0.0.5"))))
		s := Compute(in)
		lost := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown", Message: "The container could not be located when the pod was terminated"}}
		checkContainers(t, "initContainerStatuses", s.InitContainerStatuses, []wantContainer{
			{name: "init1", state: lost},
			{name: "init2", state: waiting("PodInitializing", "")},
		})
		checkContainers(t, "containerStatuses", s.ContainerStatuses, []wantContainer{{name: "app", state: waiting("PodInitializing", "")}})
		if s.Phase != corev1.PodFailed {
			t.Errorf("phase = %s, want Failed", s.Phase)
		}
	})
}

func TestComputeOverrides(t *testing.T) {
	const rejectMsg = "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 0, capacity: 1000"
	t.Run("admission rejection writes only the outcome", func(t *testing.T) {
		p := newPod(corev1.RestartPolicyAlways, "app")
		in := baseInput(p, nil)
		in.Override = &Override{Phase: corev1.PodFailed, Reason: "OutOfcpu", Message: rejectMsg, Rejected: true}
		start := nowAPI
		want := corev1.PodStatus{
			Phase: corev1.PodFailed, Reason: "OutOfcpu", Message: rejectMsg, QOSClass: corev1.PodQOSBestEffort,
			StartTime: &start, ObservedGeneration: 1, Conditions: []corev1.PodCondition{},
		}
		if got := Compute(in); !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("status = %+v\nwant %+v", got, want)
		}
	})
	deadline := &Override{Phase: corev1.PodFailed, Reason: "DeadlineExceeded", Message: "Pod was active on the node longer than the specified deadline"}
	t.Run("active deadline fails the pod once terminated", func(t *testing.T) {
		p := withStatus(newPod(corev1.RestartPolicyAlways, "app"), runningStatus("containerd://app-0"))
		in := baseInput(p, podRuntime(readySandbox("10.0.0.5"), exitedAttempt("app", 0, 137, "Error")))
		in.Override = deadline
		if s := Compute(in); s.Phase != corev1.PodRunning || s.Reason != "" {
			t.Errorf("before termination: phase %s reason %q, want Running", s.Phase, s.Reason)
		}
		if p := LocalPhase(in); p != corev1.PodFailed {
			t.Errorf("local phase = %s, want Failed", p)
		}
		s := Compute(terminated(in))
		if s.Phase != corev1.PodFailed || s.Reason != deadline.Reason || s.Message != deadline.Message {
			t.Errorf("after termination: %s %q %q", s.Phase, s.Reason, s.Message)
		}
		checkConditions(t, s, []wantCondition{{t: corev1.PodReady, status: corev1.ConditionFalse, reason: "PodFailed", lastTransitionTimeIsNow: true}})
	})
	t.Run("eviction adds its disruption condition when the pod is terminal", func(t *testing.T) {
		p := withStatus(newPod(corev1.RestartPolicyAlways, "app"), runningStatus("containerd://app-0"))
		in := terminated(baseInput(p, podRuntime(readySandbox("10.0.0.5"), exitedAttempt("app", 0, 137, "Error"))))
		in.Override = &Override{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory.",
			Condition: &corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet", Message: "The node was low on resource: memory."}}
		s := Compute(in)
		checkConditions(t, s, []wantCondition{{t: corev1.DisruptionTarget, status: corev1.ConditionTrue, reason: "TerminationByKubelet", message: "The node was low on resource: memory.", lastTransitionTimeIsNow: true}})
		if s.Phase != corev1.PodFailed || s.Reason != "Evicted" {
			t.Errorf("phase %s reason %q", s.Phase, s.Reason)
		}
		// The next status, computed on top of this one while the API copy does not show the write yet (an
		// informer cache behind it), keeps the condition: the write would otherwise take it out again.
		next := in
		next.Pod = p.DeepCopy()
		next.Pod.Status = s
		next.API = &p.Status
		s2 := Compute(next)
		checkConditions(t, s2, []wantCondition{{t: corev1.DisruptionTarget, status: corev1.ConditionTrue, reason: "TerminationByKubelet", message: "The node was low on resource: memory."}})
	})
}

func TestComputeConditionBookkeeping(t *testing.T) {
	gate := corev1.PodConditionType("example.com/ready")
	runningPod := func() *corev1.Pod {
		return withStatus(newPod(corev1.RestartPolicyAlways, "app"), runningStatus("containerd://app-0"))
	}
	rt := func() *runtime.PodStatus { return podRuntime(readySandbox("10.0.0.5"), runningAttempt("app", 0)) }
	tests := []struct {
		name  string
		pod   *corev1.Pod
		check func(t *testing.T, s corev1.PodStatus)
	}{{
		name: "transition times only move when the status changes",
		pod:  runningPod(),
		check: func(t *testing.T, s corev1.PodStatus) {
			ready := condition(s, corev1.PodReady)
			if !ready.LastTransitionTime.Equal(&metav1.Time{Time: t0}) {
				t.Errorf("Ready changed at %v, want %v", ready.LastTransitionTime, t0)
			}
			if c := condition(s, corev1.PodScheduled); !c.LastTransitionTime.Equal(&scheduled) {
				t.Errorf("PodScheduled changed at %v, want %v", c.LastTransitionTime, scheduled)
			}
			checkConditions(t, s, []wantCondition{{t: corev1.PodReadyToStartContainers, status: corev1.ConditionTrue, lastTransitionTimeIsNow: true}})
			if !s.StartTime.Equal(&metav1.Time{Time: t0}) {
				t.Errorf("startTime = %v, want the old one", s.StartTime)
			}
		},
	}, {
		name: "kubelet conditions follow foreign ones in the kubelet's order",
		pod: func() *corev1.Pod {
			p := runningPod()
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "example.com/other", Status: corev1.ConditionTrue})
			return p
		}(),
		check: func(t *testing.T, s corev1.PodStatus) {
			var got []corev1.PodConditionType
			for _, c := range s.Conditions {
				got = append(got, c.Type)
			}
			want := []corev1.PodConditionType{"example.com/other", corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("conditions = %v, want %v", got, want)
			}
		},
	}, {
		name: "missing readiness gate condition keeps the pod unready",
		pod: func() *corev1.Pod {
			p := runningPod()
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
			return p
		}(),
		check: func(t *testing.T, s corev1.PodStatus) {
			checkConditions(t, s, []wantCondition{
				{t: corev1.PodReady, status: corev1.ConditionFalse, reason: "ReadinessGatesNotReady", message: `corresponding condition of pod readiness gate "example.com/ready" does not exist.`, lastTransitionTimeIsNow: true},
				{t: corev1.ContainersReady, status: corev1.ConditionTrue},
			})
		},
	}, {
		name: "false readiness gate condition keeps the pod unready",
		pod: func() *corev1.Pod {
			p := runningPod()
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: gate, Status: corev1.ConditionFalse})
			return p
		}(),
		check: func(t *testing.T, s corev1.PodStatus) {
			checkConditions(t, s, []wantCondition{{t: corev1.PodReady, status: corev1.ConditionFalse, reason: "ReadinessGatesNotReady", message: `the status of pod readiness gate "example.com/ready" is not "True", but False`}})
		},
	}, {
		name: "true readiness gate condition is kept and makes the pod ready",
		pod: func() *corev1.Pod {
			p := runningPod()
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: gate, Status: corev1.ConditionTrue, Reason: "LBReady"})
			return p
		}(),
		check: func(t *testing.T, s corev1.PodStatus) {
			checkConditions(t, s, []wantCondition{{t: corev1.PodReady, status: corev1.ConditionTrue}, {t: gate, status: corev1.ConditionTrue, reason: "LBReady"}})
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.pod.DeepCopy()
			tt.check(t, Compute(baseInput(tt.pod, rt())))
			if !equality.Semantic.DeepEqual(before, tt.pod) {
				t.Errorf("Compute modified its input pod")
			}
		})
	}
}

func TestComputeIPs(t *testing.T) {
	tests := []struct {
		name            string
		hostNetwork     bool
		sandbox         *runtimeapi.PodSandboxStatus
		runtimeIPs      []string
		hostIPs         []string
		podIPs, hostIPv []string
	}{{
		name: "pod network, primary family first", sandbox: readySandbox("10.0.0.5"),
		runtimeIPs: []string{"fd00::5", "10.0.0.5"}, hostIPs: []string{"192.168.1.10", "fd00::10"},
		podIPs: []string{"10.0.0.5", "fd00::5"}, hostIPv: []string{"192.168.1.10", "fd00::10"},
	}, {
		name: "host network takes the node's IPs", hostNetwork: true, sandbox: hostNetworkSandbox(),
		hostIPs: []string{"192.168.1.10", "fd00::10"},
		podIPs:  []string{"192.168.1.10", "fd00::10"}, hostIPv: []string{"192.168.1.10", "fd00::10"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod(corev1.RestartPolicyAlways, "app")
			p.Spec.HostNetwork = tt.hostNetwork
			r := podRuntime(tt.sandbox, runningAttempt("app", 0))
			r.IPs = tt.runtimeIPs
			in := baseInput(p, r)
			in.HostIPs = tt.hostIPs
			s := Compute(in)
			var pod, host []string
			for _, ip := range s.PodIPs {
				pod = append(pod, ip.IP)
			}
			for _, ip := range s.HostIPs {
				host = append(host, ip.IP)
			}
			if fmt.Sprint(pod) != fmt.Sprint(tt.podIPs) || s.PodIP != tt.podIPs[0] || fmt.Sprint(host) != fmt.Sprint(tt.hostIPv) || s.HostIP != tt.hostIPv[0] {
				t.Errorf("podIPs %v (%s), hostIPs %v (%s); want %v, %v", pod, s.PodIP, host, s.HostIP, tt.podIPs, tt.hostIPv)
			}
			checkConditions(t, s, []wantCondition{{t: corev1.PodReadyToStartContainers, status: corev1.ConditionTrue}})
		})
	}
}

func TestEqual(t *testing.T) {
	base := Compute(baseInput(withStatus(newPod(corev1.RestartPolicyAlways, "app"), runningStatus("containerd://app-0")),
		podRuntime(readySandbox("10.0.0.5"), runningAttempt("app", 0))))
	tests := []struct {
		name   string
		change func(s *corev1.PodStatus)
		want   bool
	}{
		{name: "same", change: func(*corev1.PodStatus) {}, want: true},
		{name: "sub-second time differences", change: func(s *corev1.PodStatus) {
			s.StartTime = &metav1.Time{Time: s.StartTime.Add(400 * time.Millisecond)}
		}, want: true},
		{name: "condition order", change: func(s *corev1.PodStatus) {
			s.Conditions[0], s.Conditions[1] = s.Conditions[1], s.Conditions[0]
		}, want: true},
		{name: "quantity spelling", change: func(s *corev1.PodStatus) {
			s.AllocatedResources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, want: false},
		{name: "phase", change: func(s *corev1.PodStatus) { s.Phase = corev1.PodFailed }, want: false},
		{name: "readiness", change: func(s *corev1.PodStatus) { s.ContainerStatuses[0].Ready = false }, want: false},
		{name: "foreign condition", change: func(s *corev1.PodStatus) {
			s.Conditions = append(s.Conditions, corev1.PodCondition{Type: "example.com/x", Status: corev1.ConditionTrue})
		}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := base.DeepCopy()
			tt.change(changed)
			if got := Equal(&base, changed); got != tt.want {
				t.Errorf("Equal = %v, want %v", got, tt.want)
			}
		})
	}
	if !Equal(nil, nil) || Equal(&base, nil) {
		t.Errorf("Equal with nil statuses is wrong")
	}
}

func TestComputeIsStable(t *testing.T) {
	// Writing the computed status and computing again must not produce another write.
	inputs := map[string]Input{
		"running":    baseInput(newPod(corev1.RestartPolicyAlways, "app"), podRuntime(readySandbox("10.0.0.5"), runningAttempt("app", 0))),
		"terminated": terminated(baseInput(newPod(corev1.RestartPolicyNever, "app"), podRuntime(readySandbox("10.0.0.5"), exitedAttempt("app", 0, 0, "Completed")))),
		"lost":       baseInput(withStatus(newPod(corev1.RestartPolicyAlways, "app"), runningStatus("containerd://app-0")), nil),
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			first := Compute(in)
			in.Pod = withStatus(in.Pod.DeepCopy(), first)
			in.Now = in.Now.Add(time.Minute)
			if second := Compute(in); !Equal(&first, &second) {
				t.Errorf("second compute differs:\n%+v\n%+v", first, second)
			}
		})
	}
}
