package podrules

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// IsExtendedResourceName reports whether name is an extended resource (example.com/foo, nvidia.com/gpu):
// neither a native resource (no domain, or the kubernetes.io domain) nor a quota requests.* name, and a valid
// qualified name once prefixed with requests. — the API's rule (v1helper.IsExtendedResourceName). A node's
// extended resources are advertised by others (an operator, a device plugin); the agent keeps them.
func IsExtendedResourceName(name corev1.ResourceName) bool {
	n := string(name)
	if !strings.Contains(n, "/") || strings.Contains(n, corev1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(n, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+n)) == 0
}

// IsDRAExtendedResourceName reports whether name can be an extended resource backed by DRA: an extended
// resource, or a DeviceClass's implicit one (deviceclass.resource.kubernetes.io/<class>) — the
// scheduler's IsDRAExtendedResourceName.
func IsDRAExtendedResourceName(name corev1.ResourceName) bool {
	return IsExtendedResourceName(name) || strings.HasPrefix(string(name), resourceapi.ResourceDeviceClassPrefix)
}

// BackedByDRA reports whether the container's request of the resource is served by a ResourceClaim (the
// pod's status maps it to a request of its extended resource claim) rather than by the node's capacity:
// admission leaves it out, and the container gets the claim's devices.
func BackedByDRA(pod *corev1.Pod, container string, name corev1.ResourceName) bool {
	ext := pod.Status.ExtendedResourceClaimStatus
	if ext == nil || !IsDRAExtendedResourceName(name) {
		return false
	}
	for _, rm := range ext.RequestMappings {
		if corev1.ResourceName(rm.ResourceName) == name && rm.ContainerName == container {
			return true
		}
	}
	return false
}
