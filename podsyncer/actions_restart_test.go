package podsyncer

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/runtime"
)

const (
	created = runtimeapi.ContainerState_CONTAINER_CREATED
	unknown = runtimeapi.ContainerState_CONTAINER_UNKNOWN
)

var (
	ruleRestartOn42 = corev1.ContainerRestartRule{Action: corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}
	ruleRestartAllOn42 = corev1.ContainerRestartRule{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}
)

// withPolicy sets a container's restartPolicy (and restart rules).
func withPolicy(pod *corev1.Pod, name string, policy corev1.ContainerRestartPolicy, rules ...corev1.ContainerRestartRule) *corev1.Pod {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				list[i].RestartPolicy = ptr.To(policy)
				list[i].RestartPolicyRules = rules
			}
		}
	}
	return pod
}

// withInits gives a pod init containers (sidecars are named "side*").
func withInits(pod *corev1.Pod, names ...string) *corev1.Pod {
	for _, n := range names {
		c := corev1.Container{Name: n, Image: "busybox"}
		if len(n) >= 4 && n[:4] == "side" {
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	return pod
}

func inSandbox(c *runtime.ContainerStatus, sandboxID string) *runtime.ContainerStatus {
	c.SandboxID = sandboxID
	return c
}

func oomKilled(c *runtime.ContainerStatus) *runtime.ContainerStatus {
	c.Reason = reasonOOMKilled
	return c
}

func deadSandbox() []*runtimeapi.PodSandboxStatus {
	return []*runtimeapi.PodSandboxStatus{{Id: sb1, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		Metadata: &runtimeapi.PodSandboxMetadata{}}}
}

// newSandboxAfterDeadOne: sb2 is ready, sb1 (older) is not.
func newSandboxAfterDeadOne() []*runtimeapi.PodSandboxStatus {
	return []*runtimeapi.PodSandboxStatus{
		{Id: "sb2", State: runtimeapi.PodSandboxState_SANDBOX_READY, Metadata: &runtimeapi.PodSandboxMetadata{Attempt: 1}},
		{Id: sb1, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, Metadata: &runtimeapi.PodSandboxMetadata{}},
	}
}

func resetNames(rs []resetAction) []string {
	var out []string
	for _, r := range rs {
		n := r.container.Name
		if r.kill {
			n += "!"
		}
		out = append(out, n)
	}
	return out
}

// TestComputePodActionsRestartPolicies: the kubelet's restart decision with container-level restart
// policies and restart rules, for regular containers, init containers and sidecars.
func TestComputePodActionsRestartPolicies(t *testing.T) {
	const (
		podAlways    = corev1.RestartPolicyAlways
		podNever     = corev1.RestartPolicyNever
		podOnFailure = corev1.RestartPolicyOnFailure
		cAlways      = corev1.ContainerRestartPolicyAlways
		cNever       = corev1.ContainerRestartPolicyNever
		cOnFailure   = corev1.ContainerRestartPolicyOnFailure
	)
	ruleNever := withPolicy(testPod(podNever, "a"), "a", cNever, ruleRestartOn42)
	cNeverInAlways := withPolicy(testPod(podAlways, "a", "b"), "a", cNever)
	cAlwaysInNever := withPolicy(testPod(podNever, "a"), "a", cAlways)
	cOnFailureInNever := withPolicy(testPod(podNever, "a"), "a", cOnFailure)
	cOnFailureInAlways := withPolicy(testPod(podAlways, "a"), "a", cOnFailure)
	initOnFailureInNever := withPolicy(withInits(testPod(podNever, "app"), "i"), "i", cOnFailure)
	initNeverInAlways := withPolicy(withInits(testPod(podAlways, "app"), "i"), "i", cNever)
	initRuleInNever := withPolicy(withInits(testPod(podNever, "app"), "i"), "i", cNever, ruleRestartOn42)
	initInOnFailure := withInits(testPod(podOnFailure, "app"), "i")
	initInAlways := withInits(testPod(podAlways, "app"), "i")
	sidecarInNever := withInits(testPod(podNever, "app"), "side")

	tests := []struct {
		name        string
		pod         *corev1.Pod
		sandboxes   []*runtimeapi.PodSandboxStatus
		containers  []*runtime.ContainerStatus
		wantSandbox bool
		wantStart   []string
		wantRestart int
		wantCreated string
		wantKill    int
		wantDone    bool
		wantInit    bool
	}{
		// Regular containers.
		{name: "a Restart rule that matches restarts a Never container of a Never pod", pod: ruleNever,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(ruleNever, "a", exited, 42, 0)},
			wantStart: []string{"a"}, wantRestart: 1, wantInit: true},
		{name: "a Restart rule that does not match leaves it to the container's Never: the pod is done", pod: ruleNever,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(ruleNever, "a", exited, 1, 0)},
			wantDone: true, wantInit: true},
		{name: "container Never in an Always pod is not restarted while another runs", pod: cNeverInAlways,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(cNeverInAlways, "a", exited, 1, 0),
				ctr(cNeverInAlways, "b", running, 0, 0)},
			wantInit: true},
		{name: "container Never in an Always pod stays exited while the others restart", pod: cNeverInAlways,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(cNeverInAlways, "a", exited, 1, 0),
				ctr(cNeverInAlways, "b", exited, 0, 0)},
			wantStart: []string{"b"}, wantRestart: 1, wantInit: true},
		{name: "container Never in an Always pod: once it exited the pod is done (its phase fails)",
			pod: withPolicy(testPod(podAlways, "a"), "a", cNever), sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(testPod(podAlways, "a"), "a", exited, 1, 0)},
			wantDone:   true, wantInit: true},
		{name: "container Always in a Never pod restarts", pod: cAlwaysInNever,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(cAlwaysInNever, "a", exited, 1, 2)},
			wantStart: []string{"a"}, wantRestart: 3, wantInit: true},
		{name: "container OnFailure in a Never pod restarts a failure", pod: cOnFailureInNever,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(cOnFailureInNever, "a", exited, 1, 0)},
			wantStart: []string{"a"}, wantRestart: 1, wantInit: true},
		{name: "container OnFailure in a Never pod keeps a success: the pod is done", pod: cOnFailureInNever,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(cOnFailureInNever, "a", exited, 0, 1)},
			wantDone: true, wantInit: true},
		{name: "container OnFailure in an Always pod keeps a success", pod: cOnFailureInAlways,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(cOnFailureInAlways, "a", exited, 0, 0)},
			wantDone: true, wantInit: true},
		{name: "a created container that never started is started whatever its policy, not made again", pod: ruleNever,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(ruleNever, "a", created, 0, 0)},
			wantStart: []string{"a"}, wantRestart: 0, wantCreated: "a-0", wantInit: true},
		{name: "a created container of an older definition is made again", pod: ruleNever,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{func() *runtime.ContainerStatus {
				c := ctr(ruleNever, "a", created, 0, 0)
				c.Hash++
				return c
			}()},
			wantStart: []string{"a"}, wantRestart: 1, wantInit: true},
		{name: "a container in an unknown state is started again", pod: testPod(podNever, "a"),
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(testPod(podNever, "a"), "a", unknown, 0, 0)},
			wantStart: []string{"a"}, wantRestart: 1, wantInit: true},

		// Init containers.
		{name: "init container OnFailure in a Never pod restarts a failure", pod: initOnFailureInNever,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(initOnFailureInNever, "i", exited, 1, 0)},
			wantStart: []string{"i"}, wantRestart: 1},
		{name: "init container Never in an Always pod that failed fails the pod", pod: initNeverInAlways,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(initNeverInAlways, "i", exited, 1, 0)},
			wantDone: true},
		{name: "init container with a matching Restart rule in a Never pod restarts", pod: initRuleInNever,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(initRuleInNever, "i", exited, 42, 0)},
			wantStart: []string{"i"}, wantRestart: 1},
		{name: "init container with a Restart rule that does not match fails the pod", pod: initRuleInNever,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(initRuleInNever, "i", exited, 3, 0)},
			wantDone: true},
		{name: "an OOM-killed init container failed even with exit code 0: OnFailure keeps exit 0, the pod fails",
			pod: initInOnFailure, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{oomKilled(ctr(initInOnFailure, "i", exited, 0, 0))}, wantDone: true},
		{name: "an OOM-killed init container failed even with exit code 0: Always restarts it", pod: initInAlways,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{oomKilled(ctr(initInAlways, "i", exited, 0, 0))},
			wantStart: []string{"i"}, wantRestart: 1},
		{name: "an init container in an unknown state in a Never pod fails the pod", pod: withInits(testPod(podNever, "app"), "i"),
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(withInits(testPod(podNever, "app"), "i"), "i", unknown, 0, 0)},
			wantDone: true},
		{name: "an init container in an unknown state restarts under its own OnFailure", pod: initOnFailureInNever,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(initOnFailureInNever, "i", unknown, 0, 0)},
			wantStart: []string{"i"}, wantRestart: 1},
		{name: "a sidecar of a Never pod restarts before initialization", pod: sidecarInNever,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(sidecarInNever, "side", exited, 1, 0)},
			wantStart: []string{"side"}, wantRestart: 1},
		{name: "a sidecar of a Never pod restarts after initialization", pod: sidecarInNever,
			sandboxes: readySandbox(), containers: []*runtime.ContainerStatus{ctr(sidecarInNever, "side", exited, 0, 0),
				ctr(sidecarInNever, "app", running, 0, 0)},
			wantStart: []string{"side"}, wantRestart: 1, wantInit: true},

		// Sandboxes.
		{name: "a dead sandbox of a Never pod is not recreated for a container-level Always: the pod stays",
			pod: cAlwaysInNever, sandboxes: deadSandbox(),
			containers: []*runtime.ContainerStatus{ctr(cAlwaysInNever, "a", exited, 137, 0)}, wantInit: true},
		{name: "a dead sandbox of an OnFailure pod is recreated for a container that failed",
			pod: testPod(podOnFailure, "a", "b"), sandboxes: deadSandbox(),
			containers: []*runtime.ContainerStatus{ctr(testPod(podOnFailure, "a", "b"), "a", exited, 0, 0),
				ctr(testPod(podOnFailure, "a", "b"), "b", exited, 1, 0)}, wantSandbox: true},
		{name: "a dead sandbox is not recreated when every container succeeded under OnFailure",
			pod: withPolicy(testPod(podAlways, "a"), "a", cOnFailure), sandboxes: deadSandbox(),
			containers: []*runtime.ContainerStatus{ctr(testPod(podAlways, "a"), "a", exited, 0, 0)},
			wantDone:   true, wantInit: true},
		{name: "in a new sandbox a regular container's attempt in the old one counts", pod: testPod(podAlways, "a"),
			sandboxes:  newSandboxAfterDeadOne(),
			containers: []*runtime.ContainerStatus{ctr(testPod(podAlways, "a"), "a", exited, 137, 4)},
			wantStart:  []string{"a"}, wantRestart: 5, wantInit: true},
		{name: "in a new sandbox an OnFailure container that succeeded in the old one stays done",
			pod: testPod(podOnFailure, "a", "b"), sandboxes: newSandboxAfterDeadOne(),
			containers: []*runtime.ContainerStatus{ctr(testPod(podOnFailure, "a", "b"), "a", exited, 0, 0)},
			wantStart:  []string{"b"}, wantInit: true},
		{name: "in a new sandbox init containers start over", pod: initInAlways, sandboxes: newSandboxAfterDeadOne(),
			containers: []*runtime.ContainerStatus{ctr(initInAlways, "i", exited, 0, 0), ctr(initInAlways, "app", exited, 137, 0)},
			wantStart:  []string{"i"}},
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
			if len(a.start) > 0 && a.start[0].restartCount != tt.wantRestart {
				t.Errorf("restartCount = %d, want %d", a.start[0].restartCount, tt.wantRestart)
			}
			if len(a.start) > 0 && a.start[0].created != tt.wantCreated {
				t.Errorf("created = %q, want %q", a.start[0].created, tt.wantCreated)
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
			if len(a.reset) > 0 {
				t.Errorf("reset = %v, want none", resetNames(a.reset))
			}
		})
	}
}

// TestComputePodActionsRestartAllContainers: with the AllContainersRestarting condition, every attempt of
// every init and regular container is removed (running ones stopped first), those that fired the rule
// last, and nothing starts.
func TestComputePodActionsRestartAllContainers(t *testing.T) {
	pod := withPolicy(withInits(testPod(corev1.RestartPolicyNever, "source", "regular"), "init", "side"),
		"source", corev1.ContainerRestartPolicyNever, ruleRestartAllOn42)
	sourceInit := withPolicy(withInits(testPod(corev1.RestartPolicyNever, "regular"), "side", "init", "source-init"),
		"source-init", corev1.ContainerRestartPolicyNever, ruleRestartAllOn42)
	tests := []struct {
		name        string
		pod         *corev1.Pod
		sandboxes   []*runtimeapi.PodSandboxStatus
		containers  []*runtime.ContainerStatus
		wantReset   []string
		wantSandbox bool
		wantKill    int
	}{
		{name: "a regular container fired the rule", pod: pod, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(pod, "source", exited, 42, 0), ctr(pod, "regular", running, 0, 0),
				ctr(pod, "side", running, 0, 0), ctr(pod, "init", exited, 0, 0)},
			wantReset: []string{"regular!", "init", "side!", "source"}},
		{name: "every attempt goes, in every sandbox", pod: pod, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(pod, "source", exited, 42, 1), inSandbox(ctr(pod, "source", exited, 1, 0), "sb0"),
				ctr(pod, "regular", exited, 0, 0)},
			wantReset: []string{"source", "regular", "source"}},
		{name: "an init container fired the rule", pod: sourceInit, sandboxes: readySandbox(),
			containers: []*runtime.ContainerStatus{ctr(sourceInit, "side", running, 0, 0), ctr(sourceInit, "init", exited, 0, 0),
				ctr(sourceInit, "source-init", exited, 42, 0)},
			wantReset: []string{"side!", "init", "source-init"}},
		{name: "nothing left to remove", pod: pod, sandboxes: readySandbox()},
		{name: "a dead sandbox is recreated first, even for a Never pod", pod: pod, sandboxes: deadSandbox(),
			containers: []*runtime.ContainerStatus{ctr(pod, "source", exited, 42, 0)}, wantSandbox: true},
		{name: "containers still running in a dead sandbox are stopped first", pod: pod, sandboxes: deadSandbox(),
			containers: []*runtime.ContainerStatus{ctr(pod, "source", exited, 42, 0), ctr(pod, "regular", running, 0, 0)},
			wantKill:   1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &runtime.PodStatus{UID: "uid", Sandboxes: tt.sandboxes, Containers: tt.containers}
			a := computePodActions(tt.pod, st, nil, true)
			if got := resetNames(a.reset); !equalStrings(got, tt.wantReset) {
				t.Errorf("reset = %v, want %v", got, tt.wantReset)
			}
			if a.createSandbox != tt.wantSandbox {
				t.Errorf("createSandbox = %v, want %v", a.createSandbox, tt.wantSandbox)
			}
			if len(a.kill) != tt.wantKill {
				t.Errorf("kill = %d, want %d", len(a.kill), tt.wantKill)
			}
			if len(a.start) > 0 || a.done {
				t.Errorf("start = %v, done = %v; want nothing started and not done", names(a.start), a.done)
			}
		})
	}
}

func TestRestartCountFromLogs(t *testing.T) {
	dir := t.TempDir()
	if got := restartCountFromLogs(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("no directory: %d, want 0", got)
	}
	for _, f := range []string{"0.log", "1.log", "3.log.20260101-000000", "notes.txt", "x.log"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "7.log"), 0o700); err != nil {
		t.Fatal(err)
	}
	if got := restartCountFromLogs(dir); got != 4 {
		t.Errorf("restartCountFromLogs = %d, want 4 (one more than the highest rotated 3.log)", got)
	}
}
