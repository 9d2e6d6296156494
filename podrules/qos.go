package podrules

import corev1 "k8s.io/api/core/v1"

// qosResources are the resources whose requests and limits decide a QoS class.
var qosResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// GetPodQOS is the pod's QoS class (Guaranteed, Burstable or BestEffort), as the kubelet's
// k8s.io/kubernetes/pkg/apis/core/v1/helper/qos.GetPodQOS: the class recorded in the status if any, else
// the class its resources give — the pod-level resources when they set a supported resource, else every
// init and regular container's.
func GetPodQOS(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return computePodQOS(pod)
}

// computePodQOS evaluates the pod's resources, ignoring the QoS class recorded in its status.
func computePodQOS(pod *corev1.Pod) corev1.PodQOSClass {
	if PodLevelResourcesSet(pod) {
		return requirementsQOS(pod.Spec.Resources)
	}
	var class corev1.PodQOSClass
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			c := requirementsQOS(&cs[i].Resources)
			switch {
			case c == corev1.PodQOSBurstable:
				return c
			case class == "":
				class = c
			case class != c:
				return corev1.PodQOSBurstable
			}
		}
	}
	if class == "" {
		return corev1.PodQOSBestEffort
	}
	return class
}

// requirementsQOS is the QoS shape of one set of requirements.
func requirementsQOS(r *corev1.ResourceRequirements) corev1.PodQOSClass {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	var class corev1.PodQOSClass
	for _, name := range qosResources {
		c := resourceQOS(r, name)
		if c == corev1.PodQOSBurstable || (class != "" && class != c) {
			return corev1.PodQOSBurstable
		}
		class = c
	}
	return class
}

// resourceQOS: BestEffort when request and limit are both zero, Guaranteed when they are equal and
// non-zero, Burstable otherwise.
func resourceQOS(r *corev1.ResourceRequirements, name corev1.ResourceName) corev1.PodQOSClass {
	req, lim := r.Requests[name], r.Limits[name]
	switch {
	case !req.Equal(lim):
		return corev1.PodQOSBurstable
	case req.IsZero():
		return corev1.PodQOSBestEffort
	default:
		return corev1.PodQOSGuaranteed
	}
}
