package podrules

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestFindContainer(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init"}, {Name: "side", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
		Containers:     []corev1.Container{{Name: "app"}, {Name: "web"}},
		EphemeralContainers: []corev1.EphemeralContainer{
			{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}},
		},
	}}
	tests := []struct {
		name     string
		wantKind ContainerKind
	}{
		{name: "app", wantKind: RegularContainer},
		{name: "web", wantKind: RegularContainer},
		{name: "init", wantKind: InitContainer},
		{name: "side", wantKind: InitContainer},
		{name: "debug", wantKind: EphemeralContainer},
		{name: "nope", wantKind: NoContainer},
		{name: "", wantKind: NoContainer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, kind := FindContainer(pod, tt.name)
			if kind != tt.wantKind {
				t.Fatalf("kind = %v, want %v", kind, tt.wantKind)
			}
			if (c == nil) != (tt.wantKind == NoContainer) {
				t.Fatalf("container = %v with kind %v", c, kind)
			}
			if c != nil && c.Name != tt.name {
				t.Fatalf("found %q, want %q", c.Name, tt.name)
			}
		})
	}
}

func TestFindContainerPointsIntoTheSpec(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app"}},
		EphemeralContainers: []corev1.EphemeralContainer{
			{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}},
		},
	}}
	c, _ := FindContainer(pod, "app")
	if c != &pod.Spec.Containers[0] {
		t.Fatal("regular container is a copy, want the spec's own")
	}
	e, _ := FindContainer(pod, "debug")
	if e.Image != "busybox" || e != (*corev1.Container)(&pod.Spec.EphemeralContainers[0].EphemeralContainerCommon) {
		t.Fatal("ephemeral container is not a view of the spec's")
	}
}
