package podrules

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestContainerKillGracePeriod(t *testing.T) {
	tests := []struct {
		name                 string
		deletion, spec, prob *int64
		want                 int64
	}{
		{name: "the pod's", spec: ptr.To[int64](30), want: 30},
		{name: "a probe's longer one", spec: ptr.To[int64](30), prob: ptr.To[int64](120), want: 120},
		{name: "a probe's shorter one", spec: ptr.To[int64](30), prob: ptr.To[int64](5), want: 5},
		{name: "deletion wins over the probe", deletion: ptr.To[int64](10), spec: ptr.To[int64](30), prob: ptr.To[int64](120), want: 10},
		{name: "deletion with grace 0", deletion: ptr.To[int64](0), spec: ptr.To[int64](30), want: 0},
		{name: "nothing set", want: MinimumGracePeriod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: tt.spec}}
			pod.DeletionGracePeriodSeconds = tt.deletion
			if got := ContainerKillGracePeriod(pod, tt.prob); got != tt.want {
				t.Errorf("ContainerKillGracePeriod() = %d, want %d", got, tt.want)
			}
		})
	}
	if got := ContainerKillGracePeriod(nil, nil); got != MinimumGracePeriod {
		t.Errorf("ContainerKillGracePeriod(nil) = %d, want %d", got, MinimumGracePeriod)
	}
}
