package podstatus

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
)

// Condition reasons and messages of the kubelet (pkg/kubelet/status, pkg/kubelet/types).
const (
	reasonUnknownContainerStatuses = "UnknownContainerStatuses"
	reasonPodCompleted             = "PodCompleted"
	reasonPodFailed                = "PodFailed"
	reasonContainersNotReady       = "ContainersNotReady"
	reasonContainersNotInitialized = "ContainersNotInitialized"
	reasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
	reasonSandboxNotReady          = "PodSandboxNotReady"
	reasonRestartAllStarted        = "RestartAllContainersStarted"

	msgNoSandbox         = "no pod sandbox exists"
	msgMultipleSandboxes = "multiple pod sandboxes are ready and need to be reconciled"
	msgSandboxNotReady   = "pod sandbox is not ready"
	msgNetworkNamespace  = "network namespace mode changed and sandbox needs to be recreated"
	msgNoIPAddress       = "pod sandbox has no IP address"
	msgRestartAllStarted = "container exited with restart policy rule"
)

// kubeletConditions are the condition types the kubelet owns: it writes them and drops old ones.
var kubeletConditions = map[corev1.PodConditionType]bool{
	corev1.PodScheduled:              true,
	corev1.PodReady:                  true,
	corev1.PodInitialized:            true,
	corev1.ContainersReady:           true,
	corev1.PodResizeInProgress:       true,
	corev1.PodResizePending:          true,
	corev1.PodReadyToStartContainers: true,
	corev1.AllContainersRestarting:   true,
}

// conditions are the API's conditions the kubelet does not own, then its own in its order:
// PodReadyToStartContainers, Initialized, Ready, ContainersReady, PodScheduled (and AllContainersRestarting
// for pods with RestartAllContainers rules), then the override's condition.
func (b conditionRules) conditions(s *corev1.PodStatus) []corev1.PodCondition {
	conds := foreignConditions(b.api().Conditions)
	for _, c := range b.in.ResizeConditions {
		conds = append(conds, *c.DeepCopy())
	}
	all := concatStatuses(s.InitContainerStatuses, s.ContainerStatuses)
	conds = append(conds, b.conds.readyToStartCondition())
	conds = append(conds, b.conds.initializedCondition(all, s.Phase))
	conds = append(conds, b.conds.readyCondition(conds, all, s.Phase))
	conds = append(conds, b.conds.containersReadyCondition(all, s.Phase))
	conds = append(conds, b.conds.condition(corev1.PodScheduled, corev1.ConditionTrue, "", ""))
	if podrules.AllContainersCouldRestart(&b.pod.Spec) {
		conds = append(conds, b.conds.allContainersRestartingCondition(s.Phase))
	}
	if o := b.in.Override; o != nil && o.Condition != nil {
		c := *o.Condition.DeepCopy()
		if c.ObservedGeneration == 0 {
			c.ObservedGeneration = b.pod.Generation
		}
		conds = b.conds.updateCondition(conds, c)
	}
	return conds
}

func (b conditionRules) condition(t corev1.PodConditionType, status corev1.ConditionStatus, reason, message string) corev1.PodCondition {
	return corev1.PodCondition{Type: t, ObservedGeneration: b.pod.Generation, Status: status, Reason: reason, Message: message}
}

// foreignConditions copies the conditions the kubelet does not own.
func foreignConditions(old []corev1.PodCondition) []corev1.PodCondition {
	out := make([]corev1.PodCondition, 0, len(old)+6)
	for i := range old {
		if !kubeletConditions[old[i].Type] {
			out = append(out, *old[i].DeepCopy())
		}
	}
	return out
}

// readyToStartCondition: True when the newest sandbox is the only ready one, with the pod's network
// namespace mode and an IP (unless host network); that is, when no new sandbox is needed.
func (b conditionRules) readyToStartCondition() corev1.PodCondition {
	if msg := b.conds.sandboxChange(); msg != "" {
		return b.conds.condition(corev1.PodReadyToStartContainers, corev1.ConditionFalse, reasonSandboxNotReady, msg)
	}
	return b.conds.condition(corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", "")
}

// sandboxChange says why the pod needs a new sandbox (the kubelet's PodSandboxChanged), or "".
func (b conditionRules) sandboxChange() string {
	sandboxes := b.rt.Sandboxes
	if len(sandboxes) == 0 {
		return msgNoSandbox
	}
	ready := 0
	for _, sb := range sandboxes {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
	}
	newest := sandboxes[0]
	netMode := runtimeapi.NamespaceMode_POD
	if b.pod.Spec.HostNetwork {
		netMode = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case ready > 1:
		return msgMultipleSandboxes
	case newest.State != runtimeapi.PodSandboxState_SANDBOX_READY:
		return msgSandboxNotReady
	case newest.GetLinux().GetNamespaces().GetOptions().GetNetwork() != netMode:
		return msgNetworkNamespace
	case !b.pod.Spec.HostNetwork && newest.Network != nil && newest.Network.Ip == "":
		return msgNoIPAddress
	}
	return ""
}

// initializedCondition: True once every init container succeeded (sidecars: started), or once a regular
// container ran.
func (b conditionRules) initializedCondition(all []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	spec := &b.pod.Spec
	if all == nil && len(spec.InitContainers) > 0 {
		return b.conds.condition(corev1.PodInitialized, corev1.ConditionFalse, reasonUnknownContainerStatuses, "")
	}
	var unknown, incomplete []string
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		st := FindStatus(all, c.Name)
		switch {
		case st == nil:
			unknown = append(unknown, c.Name)
		case !initContainerInitialized(c, st):
			incomplete = append(incomplete, c.Name)
		}
	}
	switch {
	case phase == corev1.PodSucceeded && len(unknown) == 0:
		return b.conds.condition(corev1.PodInitialized, corev1.ConditionTrue, reasonPodCompleted, "")
	case anyRegularContainerStarted(b.pod, all):
		return b.conds.condition(corev1.PodInitialized, corev1.ConditionTrue, "", "")
	}
	msg := joinMessages(unknown, "containers with unknown status", incomplete, "containers with incomplete status")
	if msg == "" || b.conds.wasInitialized() {
		return b.conds.condition(corev1.PodInitialized, corev1.ConditionTrue, "", "")
	}
	return b.conds.condition(corev1.PodInitialized, corev1.ConditionFalse, reasonContainersNotInitialized, msg)
}

// wasInitialized: the old status says Initialized (a pod restarting in place stays initialized).
func (b conditionRules) wasInitialized() bool {
	for _, c := range b.old.Conditions {
		if c.Type == corev1.PodInitialized && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func initContainerInitialized(c *corev1.Container, st *corev1.ContainerStatus) bool {
	if podrules.IsSidecar(c) {
		return st.Started != nil && *st.Started
	}
	return st.Ready
}

// anyRegularContainerStarted: some regular container runs or ran.
func anyRegularContainerStarted(pod *corev1.Pod, all []corev1.ContainerStatus) bool {
	for i := range all {
		running, ran := all[i].State.Running != nil, all[i].State.Terminated != nil
		if (running || ran) && containerOfKind(pod, all[i].Name, podrules.RegularContainer) != nil {
			return true
		}
	}
	return false
}

// containersReadyCondition: True when every regular container and sidecar is ready.
func (b conditionRules) containersReadyCondition(all []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	if all == nil {
		return b.conds.condition(corev1.ContainersReady, corev1.ConditionFalse, reasonUnknownContainerStatuses, "")
	}
	var unknown, unready []string
	spec := &b.pod.Spec
	check := func(c *corev1.Container) {
		st := FindStatus(all, c.Name)
		switch {
		case st == nil:
			unknown = append(unknown, c.Name)
		case !st.Ready:
			unready = append(unready, c.Name)
		}
	}
	for i := range spec.InitContainers {
		if podrules.IsSidecar(&spec.InitContainers[i]) {
			check(&spec.InitContainers[i])
		}
	}
	for i := range spec.Containers {
		check(&spec.Containers[i])
	}
	if (phase == corev1.PodSucceeded && len(unknown) == 0) || phase == corev1.PodFailed {
		return b.conds.terminalCondition(corev1.ContainersReady, phase)
	}
	if msg := joinMessages(unknown, "containers with unknown status", unready, "containers with unready status"); msg != "" {
		return b.conds.condition(corev1.ContainersReady, corev1.ConditionFalse, reasonContainersNotReady, msg)
	}
	return b.conds.condition(corev1.ContainersReady, corev1.ConditionTrue, "", "")
}

// readyCondition: ContainersReady, and every readiness gate's condition True.
func (b conditionRules) readyCondition(conds []corev1.PodCondition, all []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	cr := b.conds.containersReadyCondition(all, phase)
	if cr.Status != corev1.ConditionTrue {
		return b.conds.condition(corev1.PodReady, cr.Status, cr.Reason, cr.Message)
	}
	var msgs []string
	for _, rg := range b.pod.Spec.ReadinessGates {
		c := findCondition(conds, rg.ConditionType)
		switch {
		case c == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(rg.ConditionType)))
		case c.Status != corev1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(rg.ConditionType), c.Status))
		}
	}
	if len(msgs) > 0 {
		return b.conds.condition(corev1.PodReady, corev1.ConditionFalse, reasonReadinessGatesNotReady, strings.Join(msgs, ", "))
	}
	return b.conds.condition(corev1.PodReady, corev1.ConditionTrue, "", "")
}

// NeedsReadinessSync reports whether a pod with readiness gates shows a Ready condition that its own
// status no longer implies: a gate's condition changed through pods/status. It is the kubelet's
// NeedToReconcilePodReadiness, on which the kubelet syncs the pod after a status-only update. The agent's
// own writes keep Ready and the gates consistent, so they never pass.
func NeedsReadinessSync(pod *corev1.Pod) bool {
	if len(pod.Spec.ReadinessGates) == 0 {
		return false
	}
	current := findCondition(pod.Status.Conditions, corev1.PodReady)
	if current == nil {
		return false
	}
	all := concatStatuses(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses)
	want := newBuilder(Input{Pod: pod}).conds.readyCondition(pod.Status.Conditions, all, pod.Status.Phase)
	return current.Status != want.Status || current.Message != want.Message
}

// Owned is the part of a status the agent writes: the conditions others own (a readiness gate's, a
// controller's) are left out, since the agent only copies them from the API. A patch between two owned
// statuses never touches them, as the kubelet's patch from the API's fresh copy never does.
// DisruptionTarget, which the kubelet shares, stays.
func Owned(s *corev1.PodStatus) *corev1.PodStatus {
	out := s.DeepCopy()
	out.Conditions = out.Conditions[:0]
	for _, c := range s.Conditions {
		if kubeletConditions[c.Type] || c.Type == corev1.DisruptionTarget {
			out.Conditions = append(out.Conditions, *c.DeepCopy())
		}
	}
	if len(out.Conditions) == 0 {
		out.Conditions = nil
	}
	return out
}

// terminalCondition is ContainersReady or Ready of a pod in a terminal phase.
func (b conditionRules) terminalCondition(t corev1.PodConditionType, phase corev1.PodPhase) corev1.PodCondition {
	c := b.conds.condition(t, corev1.ConditionFalse, "", "")
	switch phase {
	case corev1.PodFailed:
		c.Reason = reasonPodFailed
	case corev1.PodSucceeded:
		c.Reason = reasonPodCompleted
	}
	return c
}

// allContainersRestartingCondition reports a RestartAllContainers restart in progress.
func (b conditionRules) allContainersRestartingCondition(phase corev1.PodPhase) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.AllContainersRestarting, Status: corev1.ConditionFalse}
	switch {
	case phase == corev1.PodSucceeded:
		c.Reason = reasonPodCompleted
	case phase == corev1.PodFailed:
		c.Reason = reasonPodFailed
	case b.restarting && !b.allContainersGone():
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, reasonRestartAllStarted, msgRestartAllStarted
	}
	return c
}

// joinMessages formats lists of container names the way the kubelet does ("... status: [a b]").
func joinMessages(first []string, firstMsg string, second []string, secondMsg string) string {
	var msgs []string
	if len(first) > 0 {
		msgs = append(msgs, fmt.Sprintf("%s: %s", firstMsg, first))
	}
	if len(second) > 0 {
		msgs = append(msgs, fmt.Sprintf("%s: %s", secondMsg, second))
	}
	return strings.Join(msgs, ", ")
}

// concatStatuses joins two lists; nil when both are empty.
func concatStatuses(a, b []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(a)+len(b) == 0 {
		return nil
	}
	return append(append(make([]corev1.ContainerStatus, 0, len(a)+len(b)), a...), b...)
}

func findCondition(conds []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// updateCondition replaces or appends a condition, keeping the transition time while the status holds.
func (b conditionRules) updateCondition(conds []corev1.PodCondition, c corev1.PodCondition) []corev1.PodCondition {
	c.LastTransitionTime = b.now
	existing := findCondition(conds, c.Type)
	if existing == nil {
		return append(conds, c)
	}
	if existing.Status == c.Status {
		c.LastTransitionTime = existing.LastTransitionTime
	}
	*existing = c
	return conds
}
