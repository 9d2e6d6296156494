package podrules

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestIsLocalEphemeralVolume(t *testing.T) {
	for _, tc := range []struct {
		src  corev1.VolumeSource
		want bool
	}{
		{corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, true},
		{corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}, false},
		{corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumHugePages}}, false},
		{corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}, true},
		{corev1.VolumeSource{GitRepo: &corev1.GitRepoVolumeSource{}}, true},
		{corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}, false},
		{corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{}}, false},
	} {
		v := &corev1.Volume{Name: "v", VolumeSource: tc.src}
		if got := IsLocalEphemeralVolume(v); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.src, got, tc.want)
		}
	}
}

func TestHasLocalStorageLimit(t *testing.T) {
	limit := resource.MustParse("1Gi")
	zero := resource.MustParse("0")
	withDir := func(ed *corev1.EmptyDirVolumeSource) corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}},
			Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{EmptyDir: ed}}}}
	}
	for name, tc := range map[string]struct {
		spec corev1.PodSpec
		want bool
	}{
		"nothing":             {corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}, false},
		"emptyDir sizeLimit":  {withDir(&corev1.EmptyDirVolumeSource{SizeLimit: &limit}), true},
		"emptyDir zero limit": {withDir(&corev1.EmptyDirVolumeSource{SizeLimit: &zero}), false},
		"emptyDir no limit":   {withDir(&corev1.EmptyDirVolumeSource{}), false},
		"container limit": {corev1.PodSpec{Containers: []corev1.Container{
			{Name: "c", Resources: reqLim(nil, rl("ephemeral-storage", "1Gi"))}}}, true},
		"sidecar limit": {corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}},
			InitContainers: []corev1.Container{sidecar("s", reqLim(nil, rl("ephemeral-storage", "1Gi")))}}, true},
		"memory limit only": {corev1.PodSpec{Containers: []corev1.Container{
			{Name: "c", Resources: reqLim(nil, rl("memory", "1Gi"))}}}, false},
	} {
		if got := HasLocalStorageLimit(&corev1.Pod{Spec: tc.spec}); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
