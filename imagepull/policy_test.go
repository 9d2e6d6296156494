package imagepull

import (
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestPolicies(t *testing.T) {
	allow := []string{"registry.k8s.io/pause", "mirror.example:5000/*"}
	tests := []struct {
		policy          kubeletconfigv1beta1.ImagePullCredentialsVerificationPolicy
		image           string
		pulledByNodelet bool
		verify          bool
	}{
		{kubeletconfigv1beta1.NeverVerify, "private.example/app:1", true, false},
		{kubeletconfigv1beta1.NeverVerifyPreloadedImages, "private.example/app:1", false, false},
		{kubeletconfigv1beta1.NeverVerifyPreloadedImages, "private.example/app:1", true, true},
		{kubeletconfigv1beta1.AlwaysVerify, "private.example/app:1", false, true},
		{kubeletconfigv1beta1.NeverVerifyAllowlistedImages, "registry.k8s.io/pause:3.10", true, false},
		{kubeletconfigv1beta1.NeverVerifyAllowlistedImages, "registry.k8s.io/pause@sha256:" + sha, false, false},
		{kubeletconfigv1beta1.NeverVerifyAllowlistedImages, "registry.k8s.io/pause-evil:1", false, true},
		{kubeletconfigv1beta1.NeverVerifyAllowlistedImages, "registry.k8s.io/pause/sub:1", false, true},
		{kubeletconfigv1beta1.NeverVerifyAllowlistedImages, "mirror.example:5000/team/app:2", false, false},
		{kubeletconfigv1beta1.NeverVerifyAllowlistedImages, "mirror.example:5001/team/app:2", false, true},
		{kubeletconfigv1beta1.NeverVerifyAllowlistedImages, "pause", false, true},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy)+" "+tt.image, func(t *testing.T) {
			p, err := NewPolicy(tt.policy, allow)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.RequireVerification(tt.image, tt.pulledByNodelet); got != tt.verify {
				t.Errorf("RequireVerification = %v, want %v", got, tt.verify)
			}
		})
	}
	if _, err := NewPolicy("Sometimes", nil); err == nil {
		t.Error("an unknown policy was accepted")
	}
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestValidateAllowlist(t *testing.T) {
	tests := []struct {
		pattern string
		ok      bool
	}{
		{"registry.k8s.io/pause", true},
		{"registry.k8s.io/*", true},
		{"registry.k8s.io/team/*", true},
		{"pause", true},
		{"", false},
		{" registry.k8s.io/pause", false},
		{"registry.k8s.io/pause:3.10", false},
		{"registry.k8s.io/pause@sha256:" + sha, false},
		{"registry.k8s.io/pa*", false},
		{"*", false},
		{"/*", false},
		{"registry.k8s.io/*/app", false},
		{"Registry.K8s.io/Pause", false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			if err := ValidateAllowlist([]string{tt.pattern}); (err == nil) != tt.ok {
				t.Errorf("ValidateAllowlist = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestTrimTagAndDigest(t *testing.T) {
	tests := map[string]string{
		"busybox":                      "busybox",
		"busybox:1.36":                 "busybox",
		"reg:5000/app:1@sha256:" + sha: "reg:5000/app",
		"reg:5000/app@sha256:" + sha:   "reg:5000/app",
		"docker.io/library/busybox":    "docker.io/library/busybox",
	}
	for in, want := range tests {
		if got, err := TrimTagAndDigest(in); err != nil || got != want {
			t.Errorf("TrimTagAndDigest(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := TrimTagAndDigest("app name"); err == nil {
		t.Error("an invalid reference was accepted")
	}
}
