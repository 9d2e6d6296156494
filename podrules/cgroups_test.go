package podrules

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// The kubelet's conversions (pkg/kubelet/cm/helpers_linux_test.go's cases).
func TestCPUConversions(t *testing.T) {
	for milli, want := range map[int64]int64{0: 2, 1: 2, 100: 102, 1000: 1024, 500000: MaxShares} {
		if got := MilliCPUToShares(milli); got != want {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", milli, got, want)
		}
	}
	for milli, want := range map[int64]int64{0: 0, 5: 1000, 9: 1000, 10: 1000, 200: 20000, 500: 50000, 1500: 150000} {
		if got := MilliCPUToQuota(milli, QuotaPeriod); got != want {
			t.Errorf("MilliCPUToQuota(%d) = %d, want %d", milli, got, want)
		}
	}
	if got := SharesToMilliCPU(102); got != 100 {
		t.Errorf("SharesToMilliCPU(102) = %d, want 100", got)
	}
	if got := QuotaToMilliCPU(20000, QuotaPeriod); got != 200 {
		t.Errorf("QuotaToMilliCPU(20000) = %d, want 200", got)
	}
}

func res(cpu, mem string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return l
}

func cgroupPod(overhead corev1.ResourceList, rs ...corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{Overhead: overhead}}
	for _, r := range rs {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Resources: r})
	}
	return p
}

// The kubelet's ResourceConfigForPod cases (pkg/kubelet/cm/helpers_linux_test.go), with the quota enforced.
func TestPodCgroupResources(t *testing.T) {
	mi := func(n int64) *int64 { return ptr.To(n << 20) }
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		class corev1.PodQOSClass
		want  PodCgroup
	}{
		{"besteffort", cgroupPod(nil, corev1.ResourceRequirements{}), corev1.PodQOSBestEffort, PodCgroup{CPUShares: 2}},
		{"burstable, no limits", cgroupPod(nil, corev1.ResourceRequirements{Requests: res("100m", "100Mi")}),
			corev1.PodQOSBurstable, PodCgroup{CPUShares: 102}},
		{"burstable with limits", cgroupPod(nil, corev1.ResourceRequirements{Requests: res("100m", "100Mi"), Limits: res("200m", "200Mi")}),
			corev1.PodQOSBurstable, PodCgroup{CPUShares: 102, CPUQuota: ptr.To[int64](20000), MemoryLimit: mi(200)}},
		{"burstable, one container without limits", cgroupPod(nil,
			corev1.ResourceRequirements{Requests: res("100m", "100Mi"), Limits: res("200m", "200Mi")},
			corev1.ResourceRequirements{Requests: res("100m", "100Mi")}),
			corev1.PodQOSBurstable, PodCgroup{CPUShares: 204}},
		{"guaranteed", cgroupPod(nil, corev1.ResourceRequirements{Requests: res("100m", "100Mi"), Limits: res("100m", "100Mi")}),
			corev1.PodQOSGuaranteed, PodCgroup{CPUShares: 102, CPUQuota: ptr.To[int64](10000), MemoryLimit: mi(100)}},
		{"guaranteed with overhead", cgroupPod(res("10m", "5Mi"), corev1.ResourceRequirements{Requests: res("100m", "100Mi"), Limits: res("100m", "100Mi")}),
			corev1.PodQOSGuaranteed, PodCgroup{CPUShares: 112, CPUQuota: ptr.To[int64](11000), MemoryLimit: mi(105)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PodCgroupResources(tc.pod, tc.class)
			if got.CPUShares != tc.want.CPUShares || !equalPtr(got.CPUQuota, tc.want.CPUQuota) || !equalPtr(got.MemoryLimit, tc.want.MemoryLimit) {
				t.Errorf("PodCgroupResources = shares %d quota %v memory %v; want shares %d quota %v memory %v",
					got.CPUShares, deref(got.CPUQuota), deref(got.MemoryLimit), tc.want.CPUShares, deref(tc.want.CPUQuota), deref(tc.want.MemoryLimit))
			}
		})
	}
}

func equalPtr(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
