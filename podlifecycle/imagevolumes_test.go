package podlifecycle

import (
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/volumes"
)

// An image volume's image is pulled per its policy before the container that mounts it starts (a pull
// event of the pod, no container), and the container's CRI mount names the pulled image, read-only,
// with the mount's subPath.
func TestImageVolumeIsPulledAndMountedByReference(t *testing.T) {
	b := newLifecycleBed(t)
	b.useVolumes(&volumes.Manager{RootDir: filepath.Join(b.t.TempDir(), "root")})
	b.rt.SetPullable("registry.k8s.io/e2e-test-images/agnhost:2.66.1", 1<<20)
	b.create(bedPod("web", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "tools", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
			Reference: "registry.k8s.io/e2e-test-images/agnhost:2.66.1", PullPolicy: corev1.PullIfNotPresent}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tools", MountPath: "/tools", SubPath: "bin"}}
	}))
	b.sync("web")
	b.waitFor("the volume's image pulled and the container created", func() bool {
		b.sync("web")
		return len(b.containers("web")) == 1
	})
	cfg := b.rt.ContainerConfig(b.containers("web")[0].Id)
	var mount *runtimeapi.Mount
	for _, m := range cfg.GetMounts() {
		if m.GetContainerPath() == "/tools" {
			mount = m
		}
	}
	if mount == nil || !strings.HasPrefix(mount.GetImage().GetImage(), "sha256:") || mount.GetImageSubPath() != "bin" || !mount.GetReadonly() {
		t.Fatalf("mount of the image volume %v, want the pulled image's ID, subPath bin, read-only", mount)
	}
	pulling := false
	for len(b.rec.Events) > 0 {
		if e := <-b.rec.Events; strings.Contains(e, `Pulling image "registry.k8s.io/e2e-test-images/agnhost:2.66.1"`) {
			pulling = true
		}
	}
	if !pulling {
		t.Error("no Pulling event for the image volume")
	}
}
