package volumes

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A memory-backed emptyDir is sized as the kubelet sizes it: the node's allocatable memory, lowered to the
// pod cgroup's memory limit (pod-level limit and overhead included), then to the volume's sizeLimit.
func TestMemoryBackedEmptyDirSize(t *testing.T) {
	mi := func(n int64) int64 { return n << 20 }
	limits := func(mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	m := &Manager{NodeAllocatable: func() corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	}}
	for _, tc := range []struct {
		name      string
		pod       corev1.PodSpec
		sizeLimit string
		want      int64
	}{
		{"no limits: allocatable", corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}, "", mi(1024)},
		{"containers' limits", corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: limits("64Mi")},
			{Name: "b", Resources: limits("32Mi")}}}, "", mi(96)},
		{"one container without a limit", corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: limits("64Mi")},
			{Name: "b"}}}, "", mi(1024)},
		{"pod-level limit with overhead", corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}},
			Resources: ptrTo(limits("64Mi")), Overhead: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")}}, "", mi(80)},
		{"sizeLimit below", corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: limits("64Mi")}}}, "8Mi", mi(8)},
		{"sizeLimit above", corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: limits("64Mi")}}}, "2Gi", mi(64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var size *resource.Quantity
			if tc.sizeLimit != "" {
				q := resource.MustParse(tc.sizeLimit)
				size = &q
			}
			if got := m.srcv().memorySize(&corev1.Pod{Spec: tc.pod}, size); got != tc.want {
				t.Errorf("size %d MiB, want %d MiB", got>>20, tc.want>>20)
			}
		})
	}
}
