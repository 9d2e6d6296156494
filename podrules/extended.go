package podrules

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
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
