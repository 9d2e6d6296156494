package podrules

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestResizeRestarts(t *testing.T) {
	c := &corev1.Container{ResizePolicy: []corev1.ContainerResizePolicy{
		{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
		{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
	}}
	if ResizeRestarts(c, corev1.ResourceCPU) || !ResizeRestarts(c, corev1.ResourceMemory) {
		t.Error("want cpu in place, memory restarting")
	}
	if ResizeRestarts(&corev1.Container{}, corev1.ResourceMemory) {
		t.Error("no policy is NotRequired")
	}
}

func TestWithAppliedResources(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Resources:      &corev1.ResourceRequirements{Limits: rl("cpu", "2")},
		InitContainers: []corev1.Container{{Name: "init", Resources: reqLim(rl("cpu", "100m"), nil)}},
		Containers:     []corev1.Container{{Name: "a", Resources: reqLim(rl("cpu", "200m"), nil)}, {Name: "b", Resources: reqLim(rl("cpu", "300m"), nil)}},
	}}
	if got := WithAppliedResources(pod, nil, nil); got != pod {
		t.Error("nothing recorded: want the pod itself")
	}
	none := func(string) (corev1.ResourceRequirements, bool) { return corev1.ResourceRequirements{}, false }
	if got := WithAppliedResources(pod, func() (*corev1.ResourceRequirements, bool) { return nil, false }, none); got != pod {
		t.Error("nothing recorded: want the pod itself")
	}
	applied := map[string]corev1.ResourceRequirements{"init": reqLim(rl("cpu", "150m"), nil), "b": reqLim(rl("cpu", "1"), nil)}
	got := WithAppliedResources(pod,
		func() (*corev1.ResourceRequirements, bool) {
			return &corev1.ResourceRequirements{Limits: rl("cpu", "3")}, true
		},
		func(name string) (corev1.ResourceRequirements, bool) { r, ok := applied[name]; return r, ok })
	if got == pod {
		t.Fatal("recorded resources: want a copy")
	}
	for _, c := range []struct {
		what      string
		have      corev1.ResourceList
		want      string
		unchanged corev1.ResourceList
		orig      string
	}{
		{"pod level", got.Spec.Resources.Limits, "3", pod.Spec.Resources.Limits, "2"},
		{"init", got.Spec.InitContainers[0].Resources.Requests, "150m", pod.Spec.InitContainers[0].Resources.Requests, "100m"},
		{"a (none recorded)", got.Spec.Containers[0].Resources.Requests, "200m", pod.Spec.Containers[0].Resources.Requests, "200m"},
		{"b", got.Spec.Containers[1].Resources.Requests, "1", pod.Spec.Containers[1].Resources.Requests, "300m"},
	} {
		if q := c.have[corev1.ResourceCPU]; q.Cmp(resource.MustParse(c.want)) != 0 {
			t.Errorf("%s: cpu %s, want %s", c.what, q.String(), c.want)
		}
		if q := c.unchanged[corev1.ResourceCPU]; q.Cmp(resource.MustParse(c.orig)) != 0 {
			t.Errorf("%s: the pod's own spec changed to %s", c.what, q.String())
		}
	}
}
