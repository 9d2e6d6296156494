package podrules

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestIsExtendedResourceName(t *testing.T) {
	for name, want := range map[corev1.ResourceName]bool{
		"example.com/foo": true, "nvidia.com/gpu": true, "foo.bar/baz-1": true,
		"cpu": false, "memory": false, "hugepages-2Mi": false, "ephemeral-storage": false,
		"kubernetes.io/foo": false, "pods.kubernetes.io/bar": false, "requests.example.com/foo": false,
		"example.com/-bad": false,
	} {
		if got := IsExtendedResourceName(name); got != want {
			t.Errorf("IsExtendedResourceName(%q) = %v, want %v", name, got, want)
		}
	}
}
