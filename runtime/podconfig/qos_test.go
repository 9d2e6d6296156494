package podconfig

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/podrules"
)

func podWith(init, regular []corev1.ResourceRequirements) *corev1.Pod {
	pod := &corev1.Pod{}
	for i, r := range init {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: "init" + string(rune('a'+i)), Resources: r})
	}
	for i, r := range regular {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "c" + string(rune('a'+i)), Resources: r})
	}
	return pod
}

func TestOOMScoreAdjust(t *testing.T) {
	const capacity = 10 * gi
	burst := func(mem string) corev1.ResourceRequirements { return resources(rl("memory", mem), nil) }
	guaranteed := resources(rl("cpu", "1", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi"))
	tests := []struct {
		name   string
		pod    func() *corev1.Pod
		target func(*corev1.Pod) *corev1.Container
		want   int
	}{
		{"guaranteed", func() *corev1.Pod { return podWith(nil, []corev1.ResourceRequirements{guaranteed}) }, first, -997},
		{"best effort", func() *corev1.Pod { return podWith(nil, []corev1.ResourceRequirements{{}}) }, first, 1000},
		{"burstable 10% of memory", func() *corev1.Pod { return podWith(nil, []corev1.ResourceRequirements{burst("1Gi")}) }, first, 900},
		{"burstable without memory request", func() *corev1.Pod {
			return podWith(nil, []corev1.ResourceRequirements{resources(rl("cpu", "1"), nil)})
		}, first, 999},
		{"burstable asking for all memory", func() *corev1.Pod { return podWith(nil, []corev1.ResourceRequirements{burst("20Gi")}) }, first, 3},
		{"sidecar no higher than the smallest regular container", func() *corev1.Pod {
			p := podWith([]corev1.ResourceRequirements{burst("100Mi")}, []corev1.ResourceRequirements{burst("2Gi"), burst("1Gi")})
			p.Spec.InitContainers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			return p
		}, func(p *corev1.Pod) *corev1.Container { return &p.Spec.InitContainers[0] }, 900},
		{"pod-level request shared among containers", func() *corev1.Pod {
			p := podWith(nil, []corev1.ResourceRequirements{burst("1Gi"), {}})
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("memory", "5Gi")}
			return p
		}, first, 1000 - 1000*(gi+2*gi)/capacity},
		{"system-node-critical static pod", func() *corev1.Pod {
			p := podWith(nil, []corev1.ResourceRequirements{{}})
			p.Annotations = map[string]string{podrules.ConfigSourceAnnotation: "file"}
			p.Spec.PriorityClassName = "system-node-critical"
			return p
		}, first, -997},
		{"system-node-critical by priority", func() *corev1.Pod {
			p := podWith(nil, []corev1.ResourceRequirements{{}})
			p.Spec.Priority, p.Spec.PriorityClassName = ptr.To[int32](2000001000), "system-node-critical"
			return p
		}, first, -997},
		{"node-critical class on an API pod below critical priority", func() *corev1.Pod {
			p := podWith(nil, []corev1.ResourceRequirements{{}})
			p.Annotations = map[string]string{podrules.ConfigSourceAnnotation: "api"}
			p.Spec.PriorityClassName = "system-node-critical"
			return p
		}, first, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := tt.pod()
			if got := OOMScoreAdjust(pod, tt.target(pod), capacity); got != tt.want {
				t.Errorf("OOMScoreAdjust = %d, want %d", got, tt.want)
			}
		})
	}
}

func first(p *corev1.Pod) *corev1.Container { return &p.Spec.Containers[0] }
