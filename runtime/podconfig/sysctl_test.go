package podconfig

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodSysctls(t *testing.T) {
	tests := []struct {
		name    string
		sysctls []corev1.Sysctl
		want    map[string]string
	}{
		{name: "none", want: map[string]string{}},
		{name: "dotted names pass as they are", sysctls: []corev1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}},
			want: map[string]string{"kernel.shm_rmid_forced": "1"}},
		{name: "slashes become dots", sysctls: []corev1.Sysctl{{Name: "kernel/shm_rmid_forced", Value: "1"}},
			want: map[string]string{"kernel.shm_rmid_forced": "1"}},
		{name: "a dot inside a slashed segment becomes a slash",
			sysctls: []corev1.Sysctl{{Name: "net/ipv4/conf/eno2.100/rp_filter", Value: "0"}},
			want:    map[string]string{"net.ipv4.conf.eno2/100.rp_filter": "0"}},
		{name: "a dotted name keeps its slash", sysctls: []corev1.Sysctl{{Name: "net.ipv4.conf.eno2/100.rp_filter", Value: "0"}},
			want: map[string]string{"net.ipv4.conf.eno2/100.rp_filter": "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			pod.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: tt.sysctls}
			cfg, err := SandboxConfig(pod, 0, sandboxOpts())
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.GetLinux().GetSysctls(); !maps.Equal(got, tt.want) {
				t.Errorf("sysctls = %v, want %v", got, tt.want)
			}
		})
	}
}
