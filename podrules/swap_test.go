package podrules

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The kubelet's LimitedSwap rules (its limit calculator): cgroup v2, not critical, Burstable, a container that
// requests memory with a limit other than its request.
func TestLimitedSwapEligible(t *testing.T) {
	burstable := &corev1.Pod{}
	c := func(req, lim corev1.ResourceList) *corev1.Container {
		return &corev1.Container{Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		c     *corev1.Container
		class corev1.PodQOSClass
		v2    bool
		want  bool
	}{
		{"request below the limit", burstable, c(res("", "64Mi"), res("", "128Mi")), corev1.PodQOSBurstable, true, true},
		{"request without a limit", burstable, c(res("", "64Mi"), nil), corev1.PodQOSBurstable, true, true},
		{"cgroup v1", burstable, c(res("", "64Mi"), res("", "128Mi")), corev1.PodQOSBurstable, false, false},
		{"request equal to the limit", burstable, c(res("", "64Mi"), res("", "64Mi")), corev1.PodQOSBurstable, true, false},
		{"no memory", burstable, c(res("100m", ""), nil), corev1.PodQOSBurstable, true, false},
		{"guaranteed", burstable, c(res("1", "64Mi"), res("1", "64Mi")), corev1.PodQOSGuaranteed, true, false},
		{"best effort", burstable, c(nil, nil), corev1.PodQOSBestEffort, true, false},
		{"critical priority", &corev1.Pod{Spec: corev1.PodSpec{Priority: ptr.To(SystemCriticalPriority)}},
			c(res("", "64Mi"), res("", "128Mi")), corev1.PodQOSBurstable, true, false},
		{"static pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{ConfigSourceAnnotation: "file"}}},
			c(res("", "64Mi"), res("", "128Mi")), corev1.PodQOSBurstable, true, false},
	} {
		if got := LimitedSwapEligible(tc.pod, tc.c, tc.class, tc.v2); got != tc.want {
			t.Errorf("%s: eligible %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The kubelet's calcSwapForBurstablePods cases.
func TestLimitedSwapBytes(t *testing.T) {
	const gb = int64(1) << 30
	for _, tc := range []struct{ req, node, swap, want int64 }{
		{1 * gb, 80 * gb, 4 * gb, 53687091},
		{2 * gb, 40 * gb, 2 * gb, 107374182},
		{5 * gb, 150 * gb, 40 * gb, 1431655765},
		{1 * gb, 8 * gb, 0, 0},
	} {
		if got, err := LimitedSwapBytes(tc.req, tc.node, tc.swap); err != nil || got != tc.want {
			t.Errorf("LimitedSwapBytes(%d, %d, %d) = %d, %v; want %d", tc.req, tc.node, tc.swap, got, err, tc.want)
		}
	}
	if _, err := LimitedSwapBytes(2*gb, gb, gb); err == nil {
		t.Error("a request above the node's memory: no error")
	}
	if _, err := LimitedSwapBytes(gb, 0, gb); err == nil {
		t.Error("a node without memory: no error")
	}
}
