package podstatus

import (
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
)

// Waiting is why a container is not running, from the agent's last action on it (the kubelet's
// reasonCache): ErrImagePull, ImagePullBackOff, ErrImageNeverPull, InvalidImageName,
// CreateContainerConfigError, CreateContainerError, RunContainerError, PostStartHookError, CrashLoopBackOff
// ("back-off 10s restarting failed container=NAME pod=POD_NS/POD_NAME(UID)"), ...
//
// Like the kubelet, the reason is shown only while the container is due to be (re)started; the caller
// drops it once a start succeeds.
type Waiting struct{ Reason, Message string }

// Override is a pod-level outcome decided by the agent: admission rejection (Failed, e.g. "OutOfcpu",
// "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 0, capacity: 1000"),
// activeDeadlineSeconds (Failed, "DeadlineExceeded", "Pod was active on the node longer than the specified
// deadline"), eviction (Failed, "Evicted", with a DisruptionTarget condition).
type Override struct {
	Phase           corev1.PodPhase
	Reason, Message string
	// Rejected marks an admission rejection. The kubelet then writes only phase, reason, message, QoS class,
	// start time and observed generation: no container statuses and no kubelet conditions.
	Rejected bool
	// Condition is set with the outcome when the kubelet adds one (eviction and node shutdown add a
	// DisruptionTarget condition with reason TerminationByKubelet). Its transition time is computed here.
	Condition *corev1.PodCondition
}

// Input is everything Compute needs about one pod.
type Input struct {
	// Pod is the desired pod including its current (old) status; it is not modified.
	Pod *corev1.Pod
	// API is the status the API server holds for the pod when Pod.Status is not it (the agent's own last
	// status: the kubelet's status manager cache). The conditions the kubelet does not own — a readiness
	// gate's, set by a user or a controller through pods/status — are taken from it, as the kubelet takes
	// them from the API's pod. nil: Pod.Status is the API's.
	API *corev1.PodStatus
	// Runtime is what the runtime holds for the pod UID; nil or empty when nothing was created yet.
	Runtime *runtime.PodStatus
	// RuntimeName prefixes container IDs ("containerd" gives "containerd://<id>"); empty means "containerd".
	RuntimeName string
	// Waiting holds the agent's last start failure per container name.
	Waiting map[string]Waiting
	// Ready and Started report probe results by runtime container ID (without the "<runtime>://" prefix).
	// known=false means the probe has not produced a result yet: a container with such a probe is then not
	// ready (not started). nil means "no probes": ready = running (and, for sidecars, started),
	// started = running.
	Ready   func(containerID string) (ready, known bool)
	Started func(containerID string) (started, known bool)
	// HostIPs are the node's IPs (at most one per family, primary first).
	HostIPs []string
	// Override is the pod-level outcome decided by the agent, if any.
	Override *Override
	// ResizeConditions are the pod's PodResizePending and PodResizeInProgress conditions, as the agent's
	// resize decisions keep them.
	ResizeConditions []corev1.PodCondition
	// DeviceHealth is the health of the devices given to a container of the pod, by resource (nil: none):
	// its allocatedResourcesStatus.
	DeviceHealth func(container string) []corev1.ResourceStatus
	// Actuated is the resources last applied to a container of the pod (nil, or ok false: not known): what
	// the runtime does not report of them (the memory request) is taken from it.
	Actuated func(container string) (corev1.ResourceRequirements, bool)
	// ActuatedPodLevel is the pod-level resources last applied to the pod's cgroup (nil, or ok false: not
	// known): a running pod's status.resources are its cgroup's.
	ActuatedPodLevel func() (*corev1.ResourceRequirements, bool)
	// Terminating is true once the agent is stopping the pod (deletion, eviction, terminal phase). The
	// kubelet's status does not depend on it; it is here for the caller's bookkeeping.
	Terminating bool
	// Terminated is true once every container is stopped and the sandbox is gone: only then does a terminal
	// phase reach the API (the kubelet's podIsTerminal, and its "could have running containers" guard).
	Terminated bool
	// TerminationMessage returns the message of an exited attempt, as the kubelet reads it (the file at
	// TerminationMessagePath, or the log tail for FallbackToLogsOnError when the exit code is non-zero and
	// the reason is not ContainerCannotRun). It is appended to the runtime's message after ": ". nil: use
	// the runtime's message only.
	TerminationMessage func(c *runtime.ContainerStatus) string
	// SupportsRecursiveReadOnly tells whether the pod's runtime handler supports recursive read-only mounts
	// (volumeMounts[].recursiveReadOnly in the status).
	SupportsRecursiveReadOnly bool
	// Now stamps new transition times and the start time; zero means time.Now().
	Now time.Time
}

// Compute returns the status the kubelet would write for the pod: its generateAPIPodStatus, the status
// manager's bookkeeping (transition times, start time, normalization, TerminatePod once Terminated) and the
// merge with the API status (foreign conditions kept, a terminal phase withheld until Terminated).
func Compute(in Input) corev1.PodStatus {
	b := newBuilder(in)
	if o := in.Override; o != nil && o.Rejected {
		return b.rejected(o)
	}
	s, ok := b.local()
	if !ok {
		return *b.old.DeepCopy()
	}
	return b.cache.merge(s, !in.Terminated)
}

// LocalPhase is the phase the kubelet keeps for the pod before writing it: unlike Compute's, it is
// Succeeded or Failed as soon as the containers say so, even while some could still run. The agent
// terminates the pod when it is terminal.
func LocalPhase(in Input) corev1.PodPhase {
	b := newBuilder(in)
	if o := in.Override; o != nil && o.Rejected {
		return o.Phase
	}
	s, ok := b.local()
	if !ok {
		return b.old.Phase
	}
	return s.Phase
}

// Equal reports whether two statuses are the same for the purpose of deciding to write: every field is
// compared semantically, timestamps at the API's second precision and conditions regardless of order.
func Equal(a, b *corev1.PodStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := a.DeepCopy(), b.DeepCopy()
	normalizeTimes(x)
	normalizeTimes(y)
	sortConditions(x.Conditions)
	sortConditions(y.Conditions)
	return equality.Semantic.DeepEqual(x, y)
}

// builder computes one status; it holds the input and what is derived from it once.
type builder struct {
	in  Input
	pod *corev1.Pod
	old *corev1.PodStatus
	rt  *runtime.PodStatus
	now metav1.Time
	// restarting: a RestartAllContainers rule fired and the pod restarts in place.
	restarting bool

	// The rules the status is built with, by concern: the status manager's (what is recorded, legal
	// transitions), the pod conditions', and the container statuses'.
	cache cacheRules
	conds conditionRules
	ctrs  containerRules
}

// cacheRules are the kubelet's status manager rules: what of a generated status is recorded, and how.
type cacheRules struct{ *builder }

// conditionRules build the pod's conditions (the kubelet's status.Generate*Condition).
type conditionRules struct{ *builder }

// containerRules build the container statuses: defaults, attempts, waiting reasons, probes.
type containerRules struct{ *builder }

func newBuilder(in Input) *builder {
	rt := in.Runtime
	if rt == nil {
		rt = &runtime.PodStatus{}
	}
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	b := &builder{in: in, pod: in.Pod, old: &in.Pod.Status, rt: rt, now: metav1.NewTime(now).Rfc3339Copy()}
	b.cache, b.conds, b.ctrs = cacheRules{b}, conditionRules{b}, containerRules{b}
	b.restarting = b.shouldAllContainersRestart()
	return b
}

// local is the status the kubelet's status manager holds: generated, recorded and, once the pod is
// terminated, finished by TerminatePod. ok is false when the kubelet would refuse the update.
func (b *builder) local() (corev1.PodStatus, bool) {
	s := b.generate()
	s.ObservedGeneration = b.pod.Generation
	if !b.cache.record(&s) {
		return s, false
	}
	if b.in.Terminated {
		b.cache.terminate(&s)
		b.cache.record(&s)
	}
	return s, true
}

// generate is the kubelet's generateAPIPodStatus.
func (b *builder) generate() corev1.PodStatus {
	spec := &b.pod.Spec
	s := corev1.PodStatus{QOSClass: podrules.GetPodQOS(b.pod)}
	s.ContainerStatuses = b.ctrs.containerStatuses(spec.Containers, b.old.ContainerStatuses, false)
	b.ctrs.setDeviceHealth(s.ContainerStatuses)
	s.InitContainerStatuses = b.ctrs.containerStatuses(spec.InitContainers, b.old.InitContainerStatuses, true)
	s.EphemeralContainerStatuses = b.ctrs.containerStatuses(ephemeralContainers(spec), b.old.EphemeralContainerStatuses, false)
	s.Resources, s.AllocatedResources = b.podResources()
	b.setPhase(&s)
	b.ctrs.applyProbes(&s)
	s.Conditions = b.conds.conditions(&s)
	b.setIPs(&s)
	return s
}

// setDeviceHealth sets each container's allocatedResourcesStatus to the health of the devices it was given
// (the kubelet's UpdateAllocatedResourcesStatus, for its regular containers): an entry of a resource is
// replaced, others are kept.
func (r containerRules) setDeviceHealth(statuses []corev1.ContainerStatus) {
	if r.in.DeviceHealth == nil {
		return
	}
	for i := range statuses {
		st := &statuses[i]
		for _, rs := range r.in.DeviceHealth(st.Name) {
			j := slices.IndexFunc(st.AllocatedResourcesStatus, func(old corev1.ResourceStatus) bool { return old.Name == rs.Name })
			if j >= 0 {
				st.AllocatedResourcesStatus[j] = rs
			} else {
				st.AllocatedResourcesStatus = append(st.AllocatedResourcesStatus, rs)
			}
		}
	}
}

// rejected is the status of a pod refused at admission.
func (b *builder) rejected(o *Override) corev1.PodStatus {
	s := corev1.PodStatus{
		QOSClass:           podrules.GetPodQOS(b.pod),
		Phase:              o.Phase,
		Reason:             o.Reason,
		Message:            o.Message,
		ObservedGeneration: b.pod.Generation,
	}
	b.cache.record(&s)
	return b.cache.merge(s, false)
}

// containerID is the API form of a runtime container ID.
func (b *builder) containerID(id string) string {
	name := b.in.RuntimeName
	if name == "" {
		name = "containerd"
	}
	return name + "://" + id
}

// api is the status the API server holds (Input.API, else the pod's own).
func (b *builder) api() *corev1.PodStatus {
	if b.in.API != nil {
		return b.in.API
	}
	return b.old
}

// runtimeID strips the "<runtime>://" prefix of an API container ID.
func runtimeID(containerID string) string {
	if i := strings.Index(containerID, "://"); i >= 0 {
		return containerID[i+3:]
	}
	return containerID
}

func sortConditions(c []corev1.PodCondition) {
	sort.SliceStable(c, func(i, j int) bool { return c[i].Type < c[j].Type })
}
