package podrules

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ResourceOptions say what PodRequests and PodLimits leave out, as the kubelet's resource helper options.
type ResourceOptions struct {
	// ExcludeOverhead leaves out the pod's overhead (spec.overhead, from its RuntimeClass).
	ExcludeOverhead bool
	// SkipPodLevelResources ignores spec.resources: only the containers count.
	SkipPodLevelResources bool
}

// PodRequests is what a pod requests of the node, by the kubelet's rule (admission, the pod's cgroup):
// regular containers and sidecars add up; each other init container needs its own requests plus those
// of the sidecars declared before it; the pod needs the larger of the two, per resource. A supported
// pod-level request (cpu, memory, hugepages) stands in for that resource's sum; then the overhead is
// added.
func PodRequests(pod *corev1.Pod, opts ResourceOptions) corev1.ResourceList {
	reqs := aggregateContainers(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Requests })
	if !opts.SkipPodLevelResources && PodLevelRequestsSet(pod) {
		applyPodLevel(reqs, pod.Spec.Resources.Requests)
	}
	if !opts.ExcludeOverhead {
		addResources(reqs, pod.Spec.Overhead)
	}
	return reqs
}

// TotalRequests is what pods request of the node together: the sum of their PodRequests with opts.
func TotalRequests(pods []*corev1.Pod, opts ResourceOptions) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, p := range pods {
		addResources(total, PodRequests(p, opts))
	}
	return total
}

// PodLimits is the pod's limits by the same rule as PodRequests, with the pod-level limits standing in
// for their resources when the pod sets any pod-level resource; the overhead is added only to limits
// that are set and non-zero (an unset limit stays unlimited).
func PodLimits(pod *corev1.Pod, opts ResourceOptions) corev1.ResourceList {
	lims := aggregateContainers(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Limits })
	if !opts.SkipPodLevelResources && PodLevelResourcesSet(pod) {
		applyPodLevel(lims, pod.Spec.Resources.Limits)
	}
	if opts.ExcludeOverhead {
		return lims
	}
	for name, q := range pod.Spec.Overhead {
		if v, ok := lims[name]; ok && !v.IsZero() {
			v.Add(q)
			lims[name] = v
		}
	}
	return lims
}

// PodLevelResourcesSet says whether the pod's spec.resources sets a supported resource, as a request or
// a limit.
func PodLevelResourcesSet(pod *corev1.Pod) bool {
	return PodLevelRequestsSet(pod) || PodLevelLimitsSet(pod)
}

// ContainerLimit is the container's cpu or memory limit as its cgroup gets it (the kubelet's getCPULimit
// and getMemoryLimit, before DRA allocations): in a pod that sets pod-level resources, a container limit
// that is unset or zero takes the pod-level one.
func ContainerLimit(pod *corev1.Pod, c *corev1.Container, name corev1.ResourceName) resource.Quantity {
	lim := c.Resources.Limits[name]
	if lim.IsZero() && PodLevelResourcesSet(pod) {
		return pod.Spec.Resources.Limits[name]
	}
	return lim
}

// PodLevelRequestsSet says whether the pod's spec.resources.requests sets a supported resource.
func PodLevelRequestsSet(pod *corev1.Pod) bool {
	return pod.Spec.Resources != nil && hasPodLevelResource(pod.Spec.Resources.Requests)
}

// PodLevelLimitsSet says whether the pod's spec.resources.limits sets a supported resource.
func PodLevelLimitsSet(pod *corev1.Pod) bool {
	return pod.Spec.Resources != nil && hasPodLevelResource(pod.Spec.Resources.Limits)
}

func hasPodLevelResource(l corev1.ResourceList) bool {
	for name := range l {
		if IsSupportedPodLevelResource(name) {
			return true
		}
	}
	return false
}

// aggregateContainers is what the pod's containers need at their peak, per resource, of the list of
// requirements that of selects.
func aggregateContainers(pod *corev1.Pod, of func(*corev1.Container) corev1.ResourceList) corev1.ResourceList {
	total := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		addResources(total, of(&pod.Spec.Containers[i]))
	}
	sidecars, initPeak := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if IsSidecar(c) {
			addResources(total, of(c))
			addResources(sidecars, of(c))
			maxResources(initPeak, sidecars)
			continue
		}
		need := corev1.ResourceList{}
		addResources(need, of(c))
		addResources(need, sidecars)
		maxResources(initPeak, need)
	}
	maxResources(total, initPeak)
	return total
}

// applyPodLevel puts the supported pod-level quantities in place of the containers' sums.
func applyPodLevel(dst, podLevel corev1.ResourceList) {
	for name, q := range podLevel {
		if IsSupportedPodLevelResource(name) {
			dst[name] = q.DeepCopy()
		}
	}
}

func addResources(dst, src corev1.ResourceList) {
	for name, q := range src {
		cur, ok := dst[name]
		if !ok {
			dst[name] = q.DeepCopy()
			continue
		}
		cur.Add(q)
		dst[name] = cur
	}
}

func maxResources(dst, src corev1.ResourceList) {
	for name, q := range src {
		if cur, ok := dst[name]; !ok || q.Cmp(cur) > 0 {
			dst[name] = q.DeepCopy()
		}
	}
}
