package podlifecycle

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestPodSpecChangedPassesMetadataUpdates: a label or annotation change of a running pod reaches the
// pod worker at once, so its downwardAPI volumes are refreshed without waiting for the resync (the
// upstream "should update labels/annotations on modification" specs); a status-only write does not.
func TestPodSpecChangedPassesMetadataUpdates(t *testing.T) {
	base := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Generation: 1,
			Labels: map[string]string{"key1": "value1"}, Annotations: map[string]string{"builder": "bar"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	tests := []struct {
		name   string
		change func(p *corev1.Pod)
		want   bool
	}{
		{name: "label added", change: func(p *corev1.Pod) { p.Labels["key3"] = "value3" }, want: true},
		{name: "label removed", change: func(p *corev1.Pod) { delete(p.Labels, "key1") }, want: true},
		{name: "annotation changed", change: func(p *corev1.Pod) { p.Annotations["builder"] = "foo" }, want: true},
		{name: "status only", change: func(p *corev1.Pod) { p.Status.Message = "m" }, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			updated := base.DeepCopy()
			tt.change(updated)
			if got := podSpecChanged().Update(event.UpdateEvent{ObjectOld: base, ObjectNew: updated}); got != tt.want {
				t.Errorf("passes = %v, want %v", got, tt.want)
			}
		})
	}
}
