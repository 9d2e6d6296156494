package podsyncer

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podstatus"
)

// ensureImageVolumes pulls the images of the image volumes the container mounts, per each volume's pull
// policy, as the kubelet does before it starts the container (its events are the pod's, with no
// container). It returns the pulled reference of each such volume by name, or why the container waits
// (a pull under way, ErrImagePull, ImagePullBackOff) and when to look again.
func (s *Syncer) ensureImageVolumes(ctx context.Context, ps *PodState, pod *corev1.Pod, c *corev1.Container,
	sbCfg *runtimeapi.PodSandboxConfig) (map[string]string, *podstatus.Waiting, time.Duration) {
	var refs map[string]string
	for _, vm := range c.VolumeMounts {
		src := imageVolume(pod, vm.Name)
		if src == nil {
			continue
		}
		pull := &corev1.Container{Image: src.Reference, ImagePullPolicy: src.PullPolicy}
		creds := func() pullCredentials { return s.config.pullCredentials(ctx, pod, src.Reference) }
		img := s.puller.Ensure(ctx, ps.Key.String(), pod, pull, creds, sbCfg)
		if img.waiting != nil {
			return nil, img.waiting, img.retryIn
		}
		if refs == nil {
			refs = map[string]string{}
		}
		refs[vm.Name] = img.ref
	}
	return refs, nil, 0
}

// imageVolume is the pod's image volume name, or nil.
func imageVolume(pod *corev1.Pod, name string) *corev1.ImageVolumeSource {
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; v.Name == name {
			return v.Image
		}
	}
	return nil
}

// useImageVolumeRefs points the container's image volume mounts at the pulled images.
func useImageVolumeRefs(mounts []*runtimeapi.Mount, c *corev1.Container, refs map[string]string) {
	for _, m := range mounts {
		if m.Image == nil {
			continue
		}
		for _, vm := range c.VolumeMounts {
			if vm.MountPath == m.ContainerPath {
				if ref, ok := refs[vm.Name]; ok {
					m.Image.Image = ref
				}
			}
		}
	}
}
