package podlifecycle

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// admissionPod is a pod of one container "a".
func admissionPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "busybox"}}}}
}

func TestAdmission(t *testing.T) {
	node := &corev1.Node{}
	node.Labels = map[string]string{"zone": "a"}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("2")}
	withRequests := func(cpu, mem string) *corev1.Pod {
		p := admissionPod()
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{}
		if cpu != "" {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		return p
	}
	selector := admissionPod()
	selector.Spec.NodeSelector = map[string]string{"zone": "b"}
	initHeavy := withRequests("500m", "")
	initHeavy.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2500m")}}}}

	tests := []struct {
		name     string
		pod      *corev1.Pod
		admitted []*corev1.Pod
		reason   string
		message  string
	}{
		{name: "fits", pod: withRequests("1", "512Mi")},
		{name: "too much cpu", pod: withRequests("3", ""), reason: "OutOfcpu",
			message: "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"},
		{name: "cpu used by admitted pods", pod: withRequests("1500m", ""), admitted: []*corev1.Pod{withRequests("1", "")},
			reason: "OutOfcpu", message: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"},
		{name: "too much memory", pod: withRequests("", "2Gi"), reason: "OutOfmemory"},
		{name: "too many pods", pod: withRequests("", ""), admitted: []*corev1.Pod{withRequests("", ""), withRequests("", "")},
			reason: "OutOfpods", message: "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"},
		{name: "node selector", pod: selector, reason: "NodeAffinity",
			message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{name: "an init container's request counts when it is the largest", pod: initHeavy, reason: "OutOfcpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := admit(tt.pod, node, tt.admitted)
			if tt.reason == "" {
				if !res.admit {
					t.Fatalf("rejected: %s %s", res.reason, res.message)
				}
				return
			}
			if res.admit || res.reason != tt.reason {
				t.Fatalf("got %+v, want reason %s", res, tt.reason)
			}
			if tt.message != "" && res.message != tt.message {
				t.Fatalf("message = %q, want %q", res.message, tt.message)
			}
		})
	}
}

// Every resource the pod requests is fitted, extended resources and huge pages too, with the kubelet's
// OutOf<resource> reason; an extended resource the node does not advertise is left out (the kubelet's
// removeMissingExtendedResources), a huge page size it lacks is not.
func TestAdmissionFitsExtendedResourcesAndHugePages(t *testing.T) {
	node := &corev1.Node{}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("10"),
		"example.com/foo": resource.MustParse("2")}
	requesting := func(reqs corev1.ResourceList) *corev1.Pod {
		p := admissionPod()
		p.Spec.Containers[0].Resources.Requests = reqs
		p.Spec.Containers[0].Resources.Limits = reqs
		return p
	}
	one := requesting(corev1.ResourceList{"example.com/foo": resource.MustParse("1")})
	tests := []struct {
		name     string
		pod      *corev1.Pod
		admitted []*corev1.Pod
		reason   string
		message  string
	}{
		{name: "fits", pod: requesting(corev1.ResourceList{"example.com/foo": resource.MustParse("2")})},
		{name: "used by an admitted pod", pod: requesting(corev1.ResourceList{"example.com/foo": resource.MustParse("2")}),
			admitted: []*corev1.Pod{one}, reason: "OutOfexample.com/foo",
			message: "Node didn't have enough resource: example.com/foo, requested: 2, used: 1, capacity: 2"},
		{name: "an extended resource the node does not have", pod: requesting(corev1.ResourceList{"example.com/bar": resource.MustParse("5")})},
		{name: "a huge page size the node does not have", pod: requesting(corev1.ResourceList{"hugepages-2Mi": resource.MustParse("4Mi"),
			corev1.ResourceMemory: resource.MustParse("8Mi")}),
			reason: "OutOfhugepages-2Mi", message: "Node didn't have enough resource: hugepages-2Mi, requested: 4194304, used: 0, capacity: 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := admit(tt.pod, node, tt.admitted)
			if tt.reason == "" {
				if !res.admit {
					t.Fatalf("rejected: %s %s", res.reason, res.message)
				}
				return
			}
			if res.admit || res.reason != tt.reason || res.message != tt.message {
				t.Fatalf("got %+v, want %s: %s", res, tt.reason, tt.message)
			}
		})
	}
}
