package podsyncer

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/runtime"
)

// imageUserRuntime answers ImageStatus with an image that names no user.
type imageUserRuntime struct{ Runtime }

func (imageUserRuntime) ImageStatus(context.Context, *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	return &runtimeapi.Image{Id: "sha256:x"}, nil
}

// TestContainerConfigCarriesTheSeccompSettings: seccompDefault and <root-dir>/seccomp reach the CRI
// container config the pod worker builds.
func TestContainerConfigCarriesTheSeccompSettings(t *testing.T) {
	root := t.TempDir()
	tests := []struct {
		name           string
		profile        *corev1.SeccompProfile
		seccompDefault bool
		want           *runtimeapi.SecurityProfile
	}{
		{"seccompDefault off", nil, false, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}},
		{"seccompDefault on", nil, true, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}},
		{"Localhost under the root dir", &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("audit.json")}, true,
			&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: filepath.Join(root, "seccomp", "audit.json")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestSyncer(t, Deps{Runtime: imageUserRuntime{}}, Options{RootDir: root, SeccompDefault: tt.seccompDefault})
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "1234-abcd"},
				Spec: corev1.PodSpec{EnableServiceLinks: ptr.To(false), SecurityContext: &corev1.PodSecurityContext{SeccompProfile: tt.profile},
					Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
			c := &pod.Spec.Containers[0]
			cfg, err := r.config.containerConfig(context.Background(), pod, c, startAction{container: c}, &runtime.PodStatus{}, "sha256:x")
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.GetLinux().GetSecurityContext().GetSeccomp()
			if got.GetProfileType() != tt.want.ProfileType || got.GetLocalhostRef() != tt.want.LocalhostRef {
				t.Errorf("seccomp %v, want %v", got, tt.want)
			}
		})
	}
}
