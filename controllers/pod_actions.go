package controllers

import (
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
)

// startAction is a container to create and start.
type startAction struct {
	container    *corev1.Container
	kind         runtime.ContainerKind
	restartCount int
	// lastExit is the previous attempt, when this is a restart (it drives the crash-loop back-off).
	lastExit *runtime.ContainerStatus
}

// killAction is a running container to stop, with the reason given in the Killing event.
type killAction struct {
	container *runtime.ContainerStatus
	message   string
	// grace overrides the pod's grace period (a probe's terminationGracePeriodSeconds).
	grace *int64
}

// probeResults is what the actions need from the probes: whether a container has started (startup
// probe) and whether it must be restarted (liveness or startup probe failed).
type probeResults interface {
	Started(containerID string) (started, known bool)
	LivenessFailed(containerID string) (failed bool, message string, gracePeriod *int64)
}

// podActions is what a sync must do, computed from the pod spec and the runtime's state only (the
// kubelet's computePodActions).
type podActions struct {
	createSandbox  bool
	sandboxAttempt uint32
	// killPod: the sandbox is gone or changed while containers still run: stop them before anything else.
	killPod bool
	start   []startAction
	kill    []killAction
	// initialized: every init container succeeded (sidecars: started).
	initialized bool
	// done: nothing runs and nothing will run again (restart policy): the pod's phase is terminal.
	done bool
}

// computePodActions decides the next step for a syncing pod.
func computePodActions(pod *corev1.Pod, st *runtime.PodStatus, probes probeResults) podActions {
	var a podActions
	sb := st.ReadySandbox()
	if sb == nil {
		return sandboxActions(pod, st)
	}
	current := containersIn(st, sb.Id)
	a.initialized = initActions(pod, current, probes, &a)
	if !a.initialized {
		return a
	}
	regularActions(pod, current, probes, &a)
	a.done = !anyRegularAction(a) && !anyRegularRunning(pod, current)
	if a.done {
		a.start = nil // sidecars are not restarted once the pod's work is done
	}
	return a
}

// sandboxActions: no ready sandbox. Running containers are stopped first; then a sandbox is created
// unless the pod ran before and its restart policy says it must not start again.
func sandboxActions(pod *corev1.Pod, st *runtime.PodStatus) podActions {
	var a podActions
	for _, c := range st.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			a.killPod = true
			a.kill = append(a.kill, killAction{container: c, message: "Pod sandbox changed, it will be killed and re-created."})
		}
	}
	if a.killPod {
		return a
	}
	if len(st.Sandboxes) > 0 {
		a.sandboxAttempt = st.Sandboxes[0].GetMetadata().GetAttempt() + 1
		if pod.Spec.RestartPolicy == corev1.RestartPolicyNever && len(st.Containers) > 0 {
			a.done = true
			a.initialized = true
			return a
		}
	}
	a.createSandbox = true
	return a
}

func containersIn(st *runtime.PodStatus, sandboxID string) *runtime.PodStatus {
	out := &runtime.PodStatus{UID: st.UID, Name: st.Name, Namespace: st.Namespace, IPs: st.IPs, Sandboxes: st.Sandboxes}
	for _, c := range st.Containers {
		if c.SandboxID == sandboxID {
			out.Containers = append(out.Containers, c)
		}
	}
	return out
}

// initActions walks the init containers in order: the first one not done is (re)started, and a sidecar
// must run before the next init container starts. It returns whether the pod is initialized.
func initActions(pod *corev1.Pod, st *runtime.PodStatus, probes probeResults, a *podActions) bool {
	if regularStarted(pod, st) {
		// Initialized earlier in this sandbox: only keep the sidecars running.
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			if isSidecar(c) {
				keepRunning(c, runtime.KindSidecar, st.FindContainer(c.Name), corev1.RestartPolicyAlways, probes, a)
			}
		}
		return true
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		last := st.FindContainer(c.Name)
		if isSidecar(c) {
			if !sidecarReady(c, last, probes, a) {
				return false
			}
			continue
		}
		switch {
		case last == nil:
			a.start = append(a.start, startAction{container: c, kind: runtime.KindInit})
			return false
		case last.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
			return false
		case last.State == runtimeapi.ContainerState_CONTAINER_EXITED && last.ExitCode == 0:
			continue
		case pod.Spec.RestartPolicy == corev1.RestartPolicyNever && last.State == runtimeapi.ContainerState_CONTAINER_EXITED:
			a.done = true // an init container failed and may not run again: the pod failed
			return false
		default:
			a.start = append(a.start, restartOf(c, runtime.KindInit, last))
			return false
		}
	}
	return true
}

// sidecarReady keeps a sidecar running (starting or restarting it as needed) and reports whether it
// has started, so the next init container may run.
func sidecarReady(c *corev1.Container, last *runtime.ContainerStatus, probes probeResults, a *podActions) bool {
	if last == nil || last.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		a.start = append(a.start, restartOf(c, runtime.KindSidecar, last))
		return false
	}
	if failed, msg, grace := livenessFailed(probes, last); failed {
		a.kill = append(a.kill, killAction{container: last, message: msg, grace: grace})
		return false
	}
	return started(probes, last) // else the next init container waits for the sidecar's startup probe
}

// regularStarted reports whether any regular container was created in this sandbox.
func regularStarted(pod *corev1.Pod, st *runtime.PodStatus) bool {
	for i := range pod.Spec.Containers {
		if st.FindContainer(pod.Spec.Containers[i].Name) != nil {
			return true
		}
	}
	return false
}

// regularActions starts containers that never ran or must restart, and stops those whose definition
// changed.
func regularActions(pod *corev1.Pod, st *runtime.PodStatus, probes probeResults, a *podActions) {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		keepRunning(c, runtime.KindRegular, st.FindContainer(c.Name), pod.Spec.RestartPolicy, probes, a)
	}
}

func livenessFailed(probes probeResults, c *runtime.ContainerStatus) (bool, string, *int64) {
	if probes == nil {
		return false, "", nil
	}
	return probes.LivenessFailed(c.ID)
}

func started(probes probeResults, c *runtime.ContainerStatus) bool {
	if probes == nil {
		return true
	}
	ok, _ := probes.Started(c.ID)
	return ok
}

// keepRunning decides for one container given its latest attempt and restart policy.
func keepRunning(c *corev1.Container, kind runtime.ContainerKind, last *runtime.ContainerStatus, policy corev1.RestartPolicy, probes probeResults, a *podActions) {
	switch {
	case last == nil:
		a.start = append(a.start, startAction{container: c, kind: kind})
	case last.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
		if last.Hash != 0 && last.Hash != runtime.HashContainer(c) {
			a.kill = append(a.kill, killAction{container: last,
				message: "Container " + c.Name + " definition changed, will be restarted"})
		} else if failed, msg, grace := livenessFailed(probes, last); failed {
			a.kill = append(a.kill, killAction{container: last, message: msg, grace: grace})
		}
	case shouldRestart(policy, last):
		a.start = append(a.start, restartOf(c, kind, last))
	}
}

// shouldRestart applies the restart policy to a container that is not running.
func shouldRestart(policy corev1.RestartPolicy, last *runtime.ContainerStatus) bool {
	if last.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		return true // created but never started, or unknown: start it (again)
	}
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return last.ExitCode != 0
	default:
		return true
	}
}

func restartOf(c *corev1.Container, kind runtime.ContainerKind, last *runtime.ContainerStatus) startAction {
	s := startAction{container: c, kind: kind}
	if last != nil {
		s.restartCount = last.RestartCount + 1
		if last.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			s.lastExit = last
		}
	}
	return s
}

func anyRegularRunning(pod *corev1.Pod, st *runtime.PodStatus) bool {
	for i := range pod.Spec.Containers {
		if c := st.FindContainer(pod.Spec.Containers[i].Name); c != nil && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return true
		}
	}
	return false
}

func anyRegularAction(a podActions) bool {
	for _, s := range a.start {
		if s.kind == runtime.KindRegular {
			return true
		}
	}
	for _, k := range a.kill {
		if k.container.Kind == runtime.KindRegular {
			return true
		}
	}
	return false
}
