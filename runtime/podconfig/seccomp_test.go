package podconfig

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/runtime"
)

func TestSeccompProfileRoot(t *testing.T) {
	if got := SeccompProfileRoot("/var/lib/kubelet"); got != "/var/lib/kubelet/seccomp" {
		t.Errorf("SeccompProfileRoot = %q, want <root-dir>/seccomp", got)
	}
}

// TestSeccompDefault is the kubelet's seccompDefault: RuntimeDefault only where neither the container nor
// the pod names a profile; the sandbox always runs RuntimeDefault.
func TestSeccompDefault(t *testing.T) {
	unconfined := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	runtimeDefault := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	pod := func(podProfile, containerProfile corev1.SeccompProfileType) *corev1.Pod {
		p := testPod()
		if podProfile != "" {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: podProfile}
		}
		if containerProfile != "" {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: containerProfile}}
		}
		return p
	}
	tests := []struct {
		name           string
		pod            *corev1.Pod
		seccompDefault bool
		want           *runtimeapi.SecurityProfile
	}{
		{"no profile, seccompDefault off", pod("", ""), false, unconfined},
		{"no profile, seccompDefault on", pod("", ""), true, runtimeDefault},
		{"pod Unconfined wins over seccompDefault", pod(corev1.SeccompProfileTypeUnconfined, ""), true, unconfined},
		{"container Unconfined wins over seccompDefault", pod("", corev1.SeccompProfileTypeUnconfined), true, unconfined},
		{"pod RuntimeDefault without seccompDefault", pod(corev1.SeccompProfileTypeRuntimeDefault, ""), false, runtimeDefault},
		{"container RuntimeDefault over pod Unconfined", pod(corev1.SeccompProfileTypeUnconfined, corev1.SeccompProfileTypeRuntimeDefault), false, runtimeDefault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := containerOpts()
			opts.SeccompDefault = tt.seccompDefault
			cfg, err := ContainerConfig(tt.pod, &tt.pod.Spec.Containers[0], runtime.KindRegular, 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			assertProto(t, cfg.Linux.SecurityContext.Seccomp, tt.want)
			sb, err := SandboxConfig(tt.pod, 0, sandboxOpts())
			if err != nil {
				t.Fatal(err)
			}
			assertProto(t, sb.Linux.SecurityContext.Seccomp, runtimeDefault)
		})
	}
}

// TestLocalhostSeccompProfilePaths: a Localhost profile is a file under <root-dir>/seccomp; a path that
// could leave it is a CreateContainerConfigError, whatever the pod's source.
func TestLocalhostSeccompProfilePaths(t *testing.T) {
	const root = "/var/lib/kubelet/seccomp"
	tests := []struct {
		profile string
		want    string // LocalhostRef; "" means refused
	}{
		{"audit.json", root + "/audit.json"},
		{"profiles/audit.json", root + "/profiles/audit.json"},
		{"profiles/./audit.json", root + "/profiles/audit.json"},
		{"..audit.json", root + "/..audit.json"},
		{"profiles/..x/audit.json", root + "/profiles/..x/audit.json"},
		{"../audit.json", ""},
		{"../../../etc/passwd", ""},
		{"profiles/../../audit.json", ""},
		{"profiles/../audit.json", ""},
		{"..", ""},
		{"profiles/..", ""},
		{"/etc/seccomp/audit.json", ""},
		{"/", ""},
		{"profiles\\..\\..\\x", root + "/profiles\\..\\..\\x"}, // a backslash is a file name character on Linux
	}
	for _, tt := range tests {
		for _, level := range []string{"pod", "container"} {
			t.Run(level+" "+tt.profile, func(t *testing.T) {
				p := testPod()
				sp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To(tt.profile)}
				if level == "pod" {
					p.Spec.SecurityContext.SeccompProfile = sp
				} else {
					p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: sp}
				}
				opts := containerOpts()
				opts.SeccompProfileRoot = root
				cfg, err := ContainerConfig(p, &p.Spec.Containers[0], runtime.KindRegular, 0, opts)
				if tt.want == "" {
					if !errors.Is(err, ErrCreateContainerConfig) {
						t.Fatalf("ContainerConfig = %v, want a CreateContainerConfigError", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				assertProto(t, cfg.Linux.SecurityContext.Seccomp,
					&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: tt.want})
			})
		}
	}
}
