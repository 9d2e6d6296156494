package podrules

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func reqLim(req, lim corev1.ResourceList) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: req, Limits: lim}
}

func sidecar(name string, r corev1.ResourceRequirements) corev1.Container {
	return corev1.Container{Name: name, Resources: r, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}
}

func TestPodRequestsAndLimits(t *testing.T) {
	tests := []struct {
		name    string
		spec    corev1.PodSpec
		opts    ResourceOptions
		wantReq corev1.ResourceList
		wantLim corev1.ResourceList
	}{
		{
			name:    "no resources",
			spec:    corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}},
			wantReq: rl(), wantLim: rl(),
		},
		{
			name: "regular containers add up",
			spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "a", Resources: reqLim(rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "200m"))},
				{Name: "b", Resources: reqLim(rl("cpu", "300m"), rl("cpu", "1", "memory", "1Gi"))},
			}},
			wantReq: rl("cpu", "400m", "memory", "64Mi"), wantLim: rl("cpu", "1200m", "memory", "1Gi"),
		},
		{
			name: "a larger init container wins",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "i", Resources: reqLim(rl("cpu", "2", "memory", "10Mi"), nil)}},
				Containers:     []corev1.Container{{Name: "a", Resources: reqLim(rl("cpu", "500m", "memory", "64Mi"), nil)}},
			},
			wantReq: rl("cpu", "2", "memory", "64Mi"), wantLim: rl(),
		},
		{
			name: "sidecars add to the regular containers and to the init containers after them",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					{Name: "before", Resources: reqLim(rl("cpu", "1"), nil)},
					sidecar("side", reqLim(rl("cpu", "300m"), nil)),
					{Name: "after", Resources: reqLim(rl("cpu", "1"), nil)},
				},
				Containers: []corev1.Container{{Name: "a", Resources: reqLim(rl("cpu", "500m"), nil)}},
			},
			// max(500m + 300m, 1, 1 + 300m)
			wantReq: rl("cpu", "1300m"), wantLim: rl(),
		},
		{
			name: "overhead is added to requests and to set limits only",
			spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "a", Resources: reqLim(rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "1"))}},
				Overhead:   rl("cpu", "50m", "memory", "16Mi"),
			},
			wantReq: rl("cpu", "150m", "memory", "80Mi"), wantLim: rl("cpu", "1050m"),
		},
		{
			name: "overhead excluded",
			spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "a", Resources: reqLim(rl("cpu", "100m"), rl("cpu", "1"))}},
				Overhead:   rl("cpu", "50m"),
			},
			opts:    ResourceOptions{ExcludeOverhead: true},
			wantReq: rl("cpu", "100m"), wantLim: rl("cpu", "1"),
		},
		{
			name: "a pod-level request stands in for its resource only",
			spec: corev1.PodSpec{
				Resources:  &corev1.ResourceRequirements{Requests: rl("cpu", "2")},
				Containers: []corev1.Container{{Name: "a", Resources: reqLim(rl("cpu", "100m", "memory", "64Mi"), rl("memory", "128Mi"))}},
				Overhead:   rl("cpu", "50m"),
			},
			wantReq: rl("cpu", "2050m", "memory", "64Mi"), wantLim: rl("memory", "128Mi"),
		},
		{
			name: "pod-level limits stand in for their resources",
			spec: corev1.PodSpec{
				Resources:  &corev1.ResourceRequirements{Limits: rl("memory", "1Gi")},
				Containers: []corev1.Container{{Name: "a", Resources: reqLim(rl("memory", "64Mi"), rl("memory", "128Mi", "cpu", "1"))}},
			},
			wantReq: rl("memory", "64Mi"), wantLim: rl("memory", "1Gi", "cpu", "1"),
		},
		{
			name: "pod-level ephemeral-storage is not a pod-level resource",
			spec: corev1.PodSpec{
				Resources:  &corev1.ResourceRequirements{Requests: rl("ephemeral-storage", "1Gi"), Limits: rl("ephemeral-storage", "2Gi")},
				Containers: []corev1.Container{{Name: "a", Resources: reqLim(rl("ephemeral-storage", "100Mi"), nil)}},
			},
			wantReq: rl("ephemeral-storage", "100Mi"), wantLim: rl(),
		},
		{
			name: "pod-level resources skipped",
			spec: corev1.PodSpec{
				Resources:  &corev1.ResourceRequirements{Requests: rl("memory", "1Gi"), Limits: rl("memory", "2Gi")},
				Containers: []corev1.Container{{Name: "a", Resources: reqLim(rl("memory", "64Mi"), rl("memory", "128Mi"))}},
			},
			opts:    ResourceOptions{SkipPodLevelResources: true},
			wantReq: rl("memory", "64Mi"), wantLim: rl("memory", "128Mi"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: tt.spec}
			if got := PodRequests(pod, tt.opts); !equalResources(got, tt.wantReq) {
				t.Errorf("PodRequests() = %v, want %v", got, tt.wantReq)
			}
			if got := PodLimits(pod, tt.opts); !equalResources(got, tt.wantLim) {
				t.Errorf("PodLimits() = %v, want %v", got, tt.wantLim)
			}
		})
	}
}

func TestPodRequestsDoesNotChangeThePod(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Resources:  &corev1.ResourceRequirements{Requests: rl("cpu", "1")},
		Containers: []corev1.Container{{Name: "a", Resources: reqLim(rl("cpu", "100m"), nil)}},
		Overhead:   rl("cpu", "50m"),
	}}
	_ = PodRequests(pod, ResourceOptions{})
	if q := pod.Spec.Resources.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("pod-level cpu request changed to %v", q.String())
	}
	if q := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("100m")) != 0 {
		t.Errorf("container cpu request changed to %v", q.String())
	}
}

func TestPodLevelResourcesSet(t *testing.T) {
	tests := []struct {
		name                        string
		resources                   *corev1.ResourceRequirements
		wantAny, wantReq, wantLimit bool
	}{
		{name: "none"},
		{name: "empty", resources: &corev1.ResourceRequirements{}},
		{name: "cpu request", resources: &corev1.ResourceRequirements{Requests: rl("cpu", "1")}, wantAny: true, wantReq: true},
		{name: "memory limit", resources: &corev1.ResourceRequirements{Limits: rl("memory", "1Gi")}, wantAny: true, wantLimit: true},
		{name: "hugepages limit", resources: &corev1.ResourceRequirements{Limits: rl("hugepages-2Mi", "4Mi")}, wantAny: true, wantLimit: true},
		{name: "unsupported only", resources: &corev1.ResourceRequirements{Requests: rl("ephemeral-storage", "1Gi")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Resources: tt.resources}}
			if got := PodLevelResourcesSet(pod); got != tt.wantAny {
				t.Errorf("PodLevelResourcesSet() = %v, want %v", got, tt.wantAny)
			}
			if got := PodLevelRequestsSet(pod); got != tt.wantReq {
				t.Errorf("PodLevelRequestsSet() = %v, want %v", got, tt.wantReq)
			}
			if got := PodLevelLimitsSet(pod); got != tt.wantLimit {
				t.Errorf("PodLevelLimitsSet() = %v, want %v", got, tt.wantLimit)
			}
		})
	}
}

func TestContainerLimit(t *testing.T) {
	tests := []struct {
		name      string
		podLevel  *corev1.ResourceRequirements
		container corev1.ResourceList
		want      string
	}{
		{name: "no pod-level resources", container: rl("cpu", "500m"), want: "500m"},
		{name: "unset, no pod-level resources", want: "0"},
		{name: "unset takes the pod's", podLevel: &corev1.ResourceRequirements{Limits: rl("cpu", "2")}, want: "2"},
		{name: "zero takes the pod's", podLevel: &corev1.ResourceRequirements{Limits: rl("cpu", "2")}, container: rl("cpu", "0"), want: "2"},
		{name: "the container's own wins", podLevel: &corev1.ResourceRequirements{Limits: rl("cpu", "2")}, container: rl("cpu", "500m"), want: "500m"},
		{name: "pod-level requests only", podLevel: &corev1.ResourceRequirements{Requests: rl("cpu", "1")}, want: "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Resources: tt.podLevel,
				Containers: []corev1.Container{{Name: "a", Resources: reqLim(nil, tt.container)}}}}
			got := ContainerLimit(pod, &pod.Spec.Containers[0], corev1.ResourceCPU)
			if got.Cmp(resource.MustParse(tt.want)) != 0 {
				t.Errorf("ContainerLimit() = %v, want %v", got.String(), tt.want)
			}
		})
	}
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if w, ok := b[name]; !ok || q.Cmp(w) != 0 {
			return false
		}
	}
	return true
}
