package podlifecycle

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podsyncer"
)

// The kubelet's admission failure reasons; a resource the node lacks is OutOf<resource name> (OutOfcpu,
// OutOfpods, OutOfexample.com/foo).
const (
	reasonUnexpected         = "UnexpectedAdmissionError"
	reasonNodeAffinity       = "NodeAffinity"
	reasonNodeName           = "NodeName"
	reasonNodePorts          = "NodePorts"
	reasonTaintToleration    = "TaintToleration"
	reasonPodOSSelector      = "PodOSSelectorNodeLabelDoesNotMatch"
	reasonPodOSNotSupported  = "PodOSNotSupported"
	reasonSupplementalGroups = "SupplementalGroupsPolicyNotSupported"
)

// admissionResult says whether a pod may start on the node, and if not why (kubelet reason/message).
type admissionResult struct {
	admit   bool
	reason  string
	message string
}

// Devices is what the pod workers ask of the device manager (devices.Manager): the devices of the device
// plugin resources a pod asks for, given at admission (keep says which other pods still hold theirs; nil:
// all), the allocatable it is admitted against, and the devices its containers get (podsyncer.Devices).
type Devices interface {
	podsyncer.Devices
	Allocate(ctx context.Context, pod *corev1.Pod, keep func(types.UID) bool) error
	SanitizeAllocatable(pod *corev1.Pod, alloc corev1.ResourceList) corev1.ResourceList
}

// runAdmitHandlers runs the kubelet's pod admit handlers that nodelet has, in the kubelet's order: the
// sysctl allowlist, the device manager's allocation, then the predicates (admit) against an allocatable
// that counts the devices just given. The first rejection is reported.
func runAdmitHandlers(ctx context.Context, pod *corev1.Pod, node *corev1.Node, admitted []*corev1.Pod,
	sysctls *SysctlAllowlist, devices Devices, holders func(types.UID) bool) admissionResult {
	if res := sysctls.admit(pod); !res.admit {
		return res
	}
	if err := devices.Allocate(ctx, pod, holders); err != nil {
		return admissionResult{reason: reasonUnexpected, message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
	}
	if node != nil {
		n := *node
		n.Status.Allocatable = devices.SanitizeAllocatable(pod, node.Status.Allocatable)
		node = &n
	}
	return admit(pod, node, admitted)
}

// admit is the kubelet's predicate admit handler: the pod's OS (its kubernetes.io/os label and
// spec.os) must be the node's and its supplementalGroupsPolicy one the runtime supports, then it must fit
// in the node's allocatable minus what the admitted pods request, match the node's labels (nodeSelector and
// required node affinity) and name, find its host ports free, and, unless static, tolerate the node's
// NoExecute taints — the kubelet's GeneralPredicates in their order. The first failure is reported.
func admit(pod *corev1.Pod, node *corev1.Node, admitted []*corev1.Pod) admissionResult {
	if res := admitOS(pod, goruntime.GOOS); !res.admit {
		return res
	}
	if res := admitSupplementalGroupsPolicy(pod, node); !res.admit {
		return res
	}
	if res := admitResources(pod, node, admitted); !res.admit {
		return res
	}
	if node == nil {
		return admissionResult{admit: true}
	}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return admissionResult{reason: reasonNodeAffinity,
			message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"}
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return admissionResult{reason: reasonNodeName,
			message: "Predicate NodeName failed: node(s) didn't match the requested node name"}
	}
	if !hostPortsFree(pod, admitted) {
		return admissionResult{reason: reasonNodePorts,
			message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"}
	}
	if !podrules.IsStaticPod(pod) {
		noExecute := func(t *corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoExecute }
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, noExecute, false); untolerated {
			return admissionResult{reason: reasonTaintToleration,
				message: "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"}
		}
	}
	return admissionResult{admit: true}
}

// hostPorts is the host ports a pod holds for its life, as the scheduler counts them: those of its
// containers and of its restartable (sidecar) init containers.
func hostPorts(pod *corev1.Pod) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, c := range pod.Spec.InitContainers {
		if podrules.IsSidecar(&c) {
			out = append(out, withHostPort(c.Ports)...)
		}
	}
	for _, c := range pod.Spec.Containers {
		out = append(out, withHostPort(c.Ports)...)
	}
	return out
}

func withHostPort(ports []corev1.ContainerPort) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, p := range ports {
		if p.HostPort > 0 {
			out = append(out, p)
		}
	}
	return out
}

// hostPortsFree says whether none of the pod's host ports is held by an admitted pod: the same protocol and
// port on the same host IP, where an empty or 0.0.0.0 IP is every IP (the scheduler's NodePorts fit).
func hostPortsFree(pod *corev1.Pod, admitted []*corev1.Pod) bool {
	want := hostPorts(pod)
	if len(want) == 0 {
		return true
	}
	type key struct {
		ip, protocol string
		port         int32
	}
	norm := func(p corev1.ContainerPort) key {
		k := key{ip: p.HostIP, protocol: string(p.Protocol), port: p.HostPort}
		if k.ip == "" {
			k.ip = "0.0.0.0"
		}
		if k.protocol == "" {
			k.protocol = string(corev1.ProtocolTCP)
		}
		return k
	}
	used := map[key]bool{}
	for _, a := range admitted {
		for _, p := range hostPorts(a) {
			used[norm(p)] = true
		}
	}
	for _, p := range want {
		k := norm(p)
		for u := range used {
			if u.protocol == k.protocol && u.port == k.port && (k.ip == "0.0.0.0" || u.ip == "0.0.0.0" || u.ip == k.ip) {
				return false
			}
		}
	}
	return true
}

// admitOS rejects a pod meant for another OS than the node's: by its kubernetes.io/os label (the
// kubelet compares the pod's label, the node's label being its own OS whatever it says), then by
// spec.os.name.
func admitOS(pod *corev1.Pod, nodeOS string) admissionResult {
	if label, ok := pod.Labels[corev1.LabelOSStable]; ok && label != nodeOS {
		return admissionResult{reason: reasonPodOSSelector,
			message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != nodeOS {
		return admissionResult{reason: reasonPodOSNotSupported,
			message: "Failed to admit pod as the OS field doesn't match node OS"}
	}
	return admissionResult{admit: true}
}

// admitSupplementalGroupsPolicy rejects a pod with supplementalGroupsPolicy Strict on a node whose
// runtime does not say it supports it (status.features.supplementalGroupsPolicy): the runtime would merge
// the image's groups in. Merge is what every runtime does.
func admitSupplementalGroupsPolicy(pod *corev1.Pod, node *corev1.Node) admissionResult {
	sc := pod.Spec.SecurityContext
	if node == nil || sc == nil || sc.SupplementalGroupsPolicy == nil || *sc.SupplementalGroupsPolicy != corev1.SupplementalGroupsPolicyStrict {
		return admissionResult{admit: true}
	}
	if f := node.Status.Features; f != nil && f.SupplementalGroupsPolicy != nil && *f.SupplementalGroupsPolicy {
		return admissionResult{admit: true}
	}
	return admissionResult{reason: reasonSupplementalGroups,
		message: "SupplementalGroupsPolicy=Strict is not supported in this node"}
}

// admitResources checks the pod count, then every resource the pod requests — CPU, memory, ephemeral
// storage, huge pages, extended resources — against the node's allocatable minus what the admitted pods
// request (the scheduler's fit, as the kubelet runs it). A resource the node's allocatable lacks has none:
// without localStorageCapacityIsolation the node has no ephemeral-storage, and a pod requesting some is
// rejected; an extended resource the node does not have is left out, as the kubelet's
// removeMissingExtendedResources does (a scheduler extender's, say). Before the node is known nothing is
// checked.
func admitResources(pod *corev1.Pod, node *corev1.Node, admitted []*corev1.Pod) admissionResult {
	if node == nil {
		return admissionResult{admit: true}
	}
	alloc := node.Status.Allocatable
	if q, ok := alloc[corev1.ResourcePods]; ok && int64(len(admitted))+1 > q.Value() {
		return insufficient(corev1.ResourcePods, 1, int64(len(admitted)), q.Value())
	}
	want := podrules.PodRequests(withoutDRABackedRequests(pod), podrules.ResourceOptions{})
	used := podrules.TotalRequests(admitted, podrules.ResourceOptions{})
	for _, name := range fitOrder(want, alloc) {
		capacity := alloc[name]
		req := want[name]
		if req.IsZero() {
			continue
		}
		u := used[name]
		if value(name, req)+value(name, u) > value(name, capacity) {
			return insufficient(name, value(name, req), value(name, u), value(name, capacity))
		}
	}
	return admissionResult{admit: true}
}

// withoutDRABackedRequests is the pod without the container requests its extended resource claim serves
// (the kubelet's removeMissingExtendedResources): they are the claim's devices, not the node's capacity.
func withoutDRABackedRequests(pod *corev1.Pod) *corev1.Pod {
	if pod.Status.ExtendedResourceClaimStatus == nil {
		return pod
	}
	out := pod.DeepCopy()
	for _, cs := range [][]corev1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range cs {
			for name := range cs[i].Resources.Requests {
				if podrules.BackedByDRA(pod, cs[i].Name, name) {
					delete(cs[i].Resources.Requests, name)
				}
			}
		}
	}
	return out
}

// fitOrder is the order the scheduler's fit checks a pod's requests in: CPU, memory, ephemeral storage,
// then the other resources (huge pages, extended resources the node has) by name.
func fitOrder(want, alloc corev1.ResourceList) []corev1.ResourceName {
	names := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}
	var others []corev1.ResourceName
	for name := range want {
		if slices.Contains(names, name) || name == corev1.ResourcePods {
			continue
		}
		if _, ok := alloc[name]; !ok && podrules.IsExtendedResourceName(name) {
			continue
		}
		others = append(others, name)
	}
	slices.Sort(others)
	return append(names, others...)
}

// value is a quantity in the unit the kubelet reports: millicores for CPU, bytes otherwise.
func value(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func insufficient(name corev1.ResourceName, requested, used, capacity int64) admissionResult {
	return admissionResult{reason: "OutOf" + string(name), message: fmt.Sprintf(
		"Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", name, requested, used, capacity)}
}
