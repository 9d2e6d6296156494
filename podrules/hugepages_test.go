package podrules

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestHugePageSizeName(t *testing.T) {
	for size, want := range map[int64]string{2 << 20: "2MB", 1 << 30: "1GB", 64 << 10: "64KB", 32 << 20: "32MB", 16 << 30: "16GB"} {
		if got, ok := HugePageSizeName(size); !ok || got != want {
			t.Errorf("HugePageSizeName(%d) = %q, %v; want %q", size, got, ok, want)
		}
	}
	if got, ok := HugePageSizeName(1025 * 1024 * 1024); ok {
		t.Errorf("HugePageSizeName(1025Mi) = %q: not a whole unit", got)
	}
}

// The pod cgroup's huge page limits are the pod's requests by page size, every QoS class alike; the kubelet
// sums the containers' and takes pod-level requests for their sizes.
func TestPodCgroupHugePages(t *testing.T) {
	hp := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	withHP := func(base corev1.ResourceList, kv ...string) corev1.ResourceList {
		out := base.DeepCopy()
		maps.Copy(out, hp(kv...))
		return out
	}
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		class corev1.PodQOSClass
		want  map[int64]int64
	}{
		{"none requested", cgroupPod(nil, corev1.ResourceRequirements{Requests: res("100m", "100Mi")}), corev1.PodQOSBurstable, map[int64]int64{}},
		{"best effort with 2Mi pages", cgroupPod(nil, corev1.ResourceRequirements{Requests: hp("hugepages-2Mi", "4Mi"), Limits: hp("hugepages-2Mi", "4Mi")}),
			corev1.PodQOSBestEffort, map[int64]int64{2 << 20: 4 << 20}},
		{"two containers, two sizes", cgroupPod(nil,
			corev1.ResourceRequirements{Requests: withHP(res("1", "1Gi"), "hugepages-2Mi", "4Mi"), Limits: withHP(res("1", "1Gi"), "hugepages-2Mi", "4Mi")},
			corev1.ResourceRequirements{Requests: withHP(res("1", "1Gi"), "hugepages-2Mi", "2Mi", "hugepages-1Gi", "1Gi"),
				Limits: withHP(res("1", "1Gi"), "hugepages-2Mi", "2Mi", "hugepages-1Gi", "1Gi")}),
			corev1.PodQOSGuaranteed, map[int64]int64{2 << 20: 6 << 20, 1 << 30: 1 << 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodCgroupResources(tc.pod, tc.class).HugePageLimits; !maps.Equal(got, tc.want) {
				t.Errorf("HugePageLimits = %v, want %v", got, tc.want)
			}
		})
	}
}
