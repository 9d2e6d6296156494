package podsyncer

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// startAction is a container to create and start.
type startAction struct {
	container    *corev1.Container
	kind         runtime.ContainerKind
	restartCount int
	// lastExit is the previous attempt, when this is a restart (it drives the crash-loop back-off).
	lastExit *runtime.ContainerStatus
	// target is an ephemeral container's targetContainerName, whose process namespace it joins.
	target string
	// created is the ID of the newest attempt when the runtime holds it created and never started, from the
	// container's current definition (an agent stopped between the two calls): it is started, not made again.
	created string
}

// killAction is a running container to stop, with the reason given in the Killing event.
type killAction struct {
	container *runtime.ContainerStatus
	message   string
	// grace is a failed probe's terminationGracePeriodSeconds: the container's grace period instead of the
	// pod's (podrules.ContainerKillGracePeriod).
	grace *int64
	// deadline is when the grace period ends, set when the kill starts.
	deadline time.Time
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
	// reset: a RestartAllContainers rule fired: every init and regular container is stopped at once and
	// removed (those whose exit fired the rule last), and the pod starts over in its sandbox.
	reset []resetAction
}

// computePodActions decides the next step for a syncing pod. restartAll is the pod's
// AllContainersRestarting condition (a RestartAllContainers rule fired): the containers are then reset.
// Like the kubelet, init containers are looked up in the current sandbox only, regular containers in
// every sandbox of the pod (their newest attempt).
func computePodActions(pod *corev1.Pod, st *runtime.PodStatus, probes probeResults, restartAll bool) podActions {
	var a podActions
	sb := st.ReadySandbox()
	if sb == nil {
		return sandboxActions(pod, st, restartAll)
	}
	if restartAll {
		a.reset = resetActions(pod, st)
		return a
	}
	current := containersIn(st, sb.Id)
	a.start = ephemeralActions(pod, st)
	a.initialized = initActions(pod, current, probes, &a)
	if !a.initialized {
		return a
	}
	regularActions(pod, st, probes, &a)
	a.done = !anyRegularAction(a) && !anyRegularRunning(pod, st)
	if a.done {
		a.start = nil // sidecars are not restarted once the pod's work is done
	}
	return a
}

// ephemeralActions starts the ephemeral containers that never ran, in any sandbox of the pod: they are
// never restarted, and they may start before the pod is initialized (the kubelet starts them first).
func ephemeralActions(pod *corev1.Pod, st *runtime.PodStatus) []startAction {
	var out []startAction
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		if st.FindContainer(ec.Name) == nil {
			out = append(out, startAction{container: (*corev1.Container)(&ec.EphemeralContainerCommon),
				kind: runtime.KindEphemeral, target: ec.TargetContainerName})
		}
	}
	return out
}

// sandboxActions: no ready sandbox. Running containers are stopped first; then, as the kubelet does, a
// sandbox is created unless the pod ran before under restartPolicy Never (whatever its containers' own
// policies), or every regular container ran and none is to run again (the succeeded ones of OnFailure
// containers are not). A pod restarting all its containers always gets its sandbox.
func sandboxActions(pod *corev1.Pod, st *runtime.PodStatus, restartAll bool) podActions {
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
	}
	switch {
	case restartAll:
	case len(st.Sandboxes) > 0 && pod.Spec.RestartPolicy == corev1.RestartPolicyNever && len(st.Containers) > 0,
		!anyRegularToStart(pod, st) && st.AnyContainerCreated(pod.Spec.Containers):
		return withoutSandbox(pod, st, a.sandboxAttempt)
	}
	a.createSandbox = true
	return a
}

// anyRegularToStart: a new sandbox would start some regular container: all but those that succeeded
// under an OnFailure policy (the container's if set, else the pod's).
func anyRegularToStart(pod *corev1.Pod, st *runtime.PodStatus) bool {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		runOnce := pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure
		if c.RestartPolicy != nil {
			runOnce = *c.RestartPolicy == corev1.ContainerRestartPolicyOnFailure
		}
		last := st.FindContainer(c.Name)
		succeeded := last != nil && last.State == runtimeapi.ContainerState_CONTAINER_EXITED && last.ExitCode == 0
		if !runOnce || !succeeded {
			return true
		}
	}
	return false
}

// withoutSandbox: the kubelet neither creates a sandbox nor starts anything; the pod's phase decides what
// happens next. The pod is done when that phase is terminal: every regular container exited and none
// restarts after its exit. Otherwise it stays as it is, as it does under the kubelet.
func withoutSandbox(pod *corev1.Pod, st *runtime.PodStatus, attempt uint32) podActions {
	a := podActions{sandboxAttempt: attempt, initialized: true, done: true}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		last := st.FindContainer(c.Name)
		if last == nil || last.State != runtimeapi.ContainerState_CONTAINER_EXITED ||
			podrules.ShouldContainerBeRestarted(pod, c, last.Attempt()) {
			a.done = false
		}
	}
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
			if podrules.IsSidecar(c) {
				keepRunning(pod, c, runtime.KindSidecar, st.FindContainer(c.Name), probes, a)
			}
		}
		return true
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		last := st.FindContainer(c.Name)
		if podrules.IsSidecar(c) {
			if !sidecarReady(c, last, probes, a) {
				return false
			}
			continue
		}
		if succeeded(last) {
			continue
		}
		nextInitAction(pod, c, last, a)
		return false
	}
	return true
}

// nextInitAction (re)starts an init container that has not succeeded, or waits for it while it runs.
// A failed one restarts as its restart policy (rules, then its own policy, then the pod's) says after
// its exit; one in an unknown state as its policy or the pod's says. One that does not restart has
// failed the pod: it is done.
func nextInitAction(pod *corev1.Pod, c *corev1.Container, last *runtime.ContainerStatus, a *podActions) {
	restart := true
	switch last.Attempt().State {
	case podrules.AttemptRunning:
		return
	case podrules.AttemptExited:
		restart = podrules.ShouldContainerBeRestarted(pod, c, last.Attempt())
	case podrules.AttemptUnknown:
		restart = podrules.RestartsAfterKill(c, &pod.Spec)
	}
	if !restart {
		a.done = true
		return
	}
	a.start = append(a.start, restartOf(c, runtime.KindInit, last))
}

// succeeded: an init container's newest attempt exited 0 and was not OOM-killed (the kubelet's
// isInitContainerFailed counts an OOM kill as a failure whatever the exit code).
func succeeded(last *runtime.ContainerStatus) bool {
	return last != nil && last.State == runtimeapi.ContainerState_CONTAINER_EXITED && last.ExitCode == 0 &&
		last.Reason != reasonOOMKilled
}

// reasonOOMKilled is the runtime's reason for a container the kernel killed for memory.
const reasonOOMKilled = "OOMKilled"

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
// changed or whose liveness probe failed.
func regularActions(pod *corev1.Pod, st *runtime.PodStatus, probes probeResults, a *podActions) {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		keepRunning(pod, c, runtime.KindRegular, st.FindContainer(c.Name), probes, a)
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

// keepRunning decides for one container (regular, or a sidecar of an initialized pod) given its newest
// attempt: the kubelet's restart decision for one that does not run (podrules.ShouldContainerBeRestarted:
// restart rules, then the container's restartPolicy, then the pod's), a kill for one that runs with a
// changed definition or a failed liveness probe.
func keepRunning(pod *corev1.Pod, c *corev1.Container, kind runtime.ContainerKind, last *runtime.ContainerStatus, probes probeResults, a *podActions) {
	switch {
	case last == nil || last.State != runtimeapi.ContainerState_CONTAINER_RUNNING:
		if podrules.ShouldContainerBeRestarted(pod, c, last.Attempt()) {
			a.start = append(a.start, restartOf(c, kind, last))
		}
	case last.Hash != 0 && last.Hash != podconfig.HashContainer(c):
		a.kill = append(a.kill, killAction{container: last,
			message: "Container " + c.Name + " definition changed, will be restarted"})
	default:
		if failed, msg, grace := livenessFailed(probes, last); failed {
			a.kill = append(a.kill, killAction{container: last, message: msg, grace: grace})
		}
	}
}

func restartOf(c *corev1.Container, kind runtime.ContainerKind, last *runtime.ContainerStatus) startAction {
	s := startAction{container: c, kind: kind}
	if last != nil && last.State == runtimeapi.ContainerState_CONTAINER_CREATED && last.Hash != 0 && last.Hash == podconfig.HashContainer(c) {
		s.created, s.restartCount = last.ID, last.RestartCount
		return s
	}
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
