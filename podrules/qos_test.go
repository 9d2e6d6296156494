package podrules

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func qosPod(init, regular []corev1.ResourceRequirements) *corev1.Pod {
	pod := &corev1.Pod{}
	for i, r := range init {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: fmt.Sprint("init", i), Resources: r})
	}
	for i, r := range regular {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: fmt.Sprint("c", i), Resources: r})
	}
	return pod
}

func TestGetPodQOS(t *testing.T) {
	guaranteed := reqLim(rl("cpu", "1", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi"))
	none := corev1.ResourceRequirements{}
	reqs := func(r ...corev1.ResourceRequirements) []corev1.ResourceRequirements { return r }
	tests := []struct {
		name    string
		init    []corev1.ResourceRequirements
		regular []corev1.ResourceRequirements
		podRes  *corev1.ResourceRequirements
		status  corev1.PodQOSClass
		want    corev1.PodQOSClass
	}{
		{"no resources", nil, reqs(none), nil, "", corev1.PodQOSBestEffort},
		{"no containers", nil, nil, nil, "", corev1.PodQOSBestEffort},
		{"requests equal limits", nil, reqs(guaranteed, guaranteed), nil, "", corev1.PodQOSGuaranteed},
		{"requests defaulted from limits by the API", nil,
			reqs(guaranteed, reqLim(rl("cpu", "2", "memory", "64Mi"), rl("cpu", "2", "memory", "64Mi"))), nil, "", corev1.PodQOSGuaranteed},
		{"limits only (requests defaulted from them by the API) still need both resources", nil,
			reqs(reqLim(nil, rl("cpu", "1"))), nil, "", corev1.PodQOSBurstable},
		{"memory missing", nil, reqs(reqLim(rl("cpu", "1"), rl("cpu", "1"))), nil, "", corev1.PodQOSBurstable},
		{"requests below limits", nil, reqs(reqLim(rl("cpu", "1", "memory", "1Gi"), rl("cpu", "2", "memory", "1Gi"))),
			nil, "", corev1.PodQOSBurstable},
		{"guaranteed and best effort mixed", nil, reqs(guaranteed, none), nil, "", corev1.PodQOSBurstable},
		{"init container counts", reqs(none), reqs(guaranteed), nil, "", corev1.PodQOSBurstable},
		{"other resources do not count", nil, reqs(reqLim(rl("ephemeral-storage", "1Gi"), nil)), nil, "", corev1.PodQOSBestEffort},
		{"pod-level resources decide", nil, reqs(none),
			&corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")}, "", corev1.PodQOSGuaranteed},
		{"pod-level burstable over guaranteed containers", nil, reqs(guaranteed),
			&corev1.ResourceRequirements{Requests: rl("cpu", "1")}, "", corev1.PodQOSBurstable},
		{"pod-level resources of unsupported kinds are ignored", nil, reqs(guaranteed),
			&corev1.ResourceRequirements{Requests: rl("ephemeral-storage", "1Gi")}, "", corev1.PodQOSGuaranteed},
		{"the recorded class wins", nil, reqs(none), nil, corev1.PodQOSGuaranteed, corev1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := qosPod(tt.init, tt.regular)
			pod.Spec.Resources = tt.podRes
			pod.Status.QOSClass = tt.status
			if got := GetPodQOS(pod); got != tt.want {
				t.Errorf("GetPodQOS = %s, want %s", got, tt.want)
			}
		})
	}
}
