package podconfig

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The kubelet v1.37.1 annotated its containers (name main and side, image busybox) with these hashes on
// the handover bed (hack/handover.sh), read back through the CRI.
func TestHashContainerIsTheKubelets(t *testing.T) {
	for _, tc := range []struct {
		name, image string
		want        uint64
	}{{"main", "busybox", 0xb34e1a14}, {"side", "busybox", 0xfcffdbfc}} {
		if got := HashContainer(&corev1.Container{Name: tc.name, Image: tc.image}); got != tc.want {
			t.Errorf("HashContainer(%s, %s) = %x, want the kubelet's %x", tc.name, tc.image, got, tc.want)
		}
	}
	// Only name and image count: what may change in place (resources) or cannot change does not.
	c := &corev1.Container{Name: "main", Image: "busybox", Command: []string{"sleep"},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
	if HashContainer(c) != 0xb34e1a14 {
		t.Error("fields other than name and image changed the hash")
	}
	c.Image = "busybox:1.37"
	if HashContainer(c) == 0xb34e1a14 {
		t.Error("a new image kept the hash")
	}
}
