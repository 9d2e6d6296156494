package config

import (
	"crypto/tls"
	"slices"
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestSecurityValidationNamesTheField(t *testing.T) {
	cases := []struct {
		name string
		body string
		args []string
		want []string
	}{
		{"unknown cipher suite", "tlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_FAKE]\n", nil,
			[]string{"tlsCipherSuites[1]", "TLS_FAKE", "not supported"}},
		{"unknown cipher suite flag", "", []string{"--tls-cipher-suites=TLS_RSA_WITH_RC4_128_MD5"},
			[]string{"tlsCipherSuites[0]", "TLS_RSA_WITH_RC4_128_MD5"}},
		{"unknown TLS version", "tlsMinVersion: VersionTLS14\n", nil, []string{"tlsMinVersion", "VersionTLS14", "VersionTLS13"}},
		{"Go-style TLS version", "tlsMinVersion: \"1.3\"\n", nil, []string{"tlsMinVersion"}},
		{"unsupported curve", "tlsCurvePreferences: [29, 99]\n", nil, []string{"tlsCurvePreferences", "99"}},
		{"unknown image pull policy", "imagePullCredentialsVerificationPolicy: Sometimes\n", nil,
			[]string{"imagePullCredentialsVerificationPolicy", "Sometimes", "NeverVerifyPreloadedImages"}},
		{"allowlist without its policy", "preloadedImagesVerificationAllowlist: [registry.k8s.io/pause]\n", nil,
			[]string{"preloadedImagesVerificationAllowlist", "NeverVerifyAllowlistedImages"}},
		{"allowlist with a tag", "imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\npreloadedImagesVerificationAllowlist: [registry.k8s.io/pause:3.10]\n", nil,
			[]string{"preloadedImagesVerificationAllowlist", "neither tag nor digest"}},
		{"policy with the gate off", "featureGates:\n  KubeletEnsureSecretPulledImages: false\nimagePullCredentialsVerificationPolicy: AlwaysVerify\n", nil,
			[]string{"imagePullCredentialsVerificationPolicy", "KubeletEnsureSecretPulledImages"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadFileT(t, header+tc.body, tc.args...)
			wantErrContains(t, err, tc.want...)
		})
	}
}

func TestParseTLS(t *testing.T) {
	cases := []struct {
		name string
		kc   kubeletconfigv1beta1.KubeletConfiguration
		want TLS
	}{
		{"defaults: TLS 1.2, Go's suites and curves", kubeletconfigv1beta1.KubeletConfiguration{}, TLS{MinVersion: tls.VersionTLS12}},
		{"kubelet names", kubeletconfigv1beta1.KubeletConfiguration{
			TLSMinVersion:       "VersionTLS13",
			TLSCipherSuites:     []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"},
			TLSCurvePreferences: []int32{29, 23},
		}, TLS{MinVersion: tls.VersionTLS13,
			CipherSuites:     []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_AES_128_GCM_SHA256},
			CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256}}},
		{"TLS 1.0 allowed when asked", kubeletconfigv1beta1.KubeletConfiguration{TLSMinVersion: "VersionTLS10"}, TLS{MinVersion: tls.VersionTLS10}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTLS(&tc.kc)
			if err != nil {
				t.Fatal(err)
			}
			if got.MinVersion != tc.want.MinVersion || !slices.Equal(got.CipherSuites, tc.want.CipherSuites) ||
				!slices.Equal(got.CurvePreferences, tc.want.CurvePreferences) {
				t.Errorf("ParseTLS = %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := ParseTLS(&kubeletconfigv1beta1.KubeletConfiguration{TLSCipherSuites: []string{"nope"}}); err == nil {
		t.Error("ParseTLS accepted an unknown cipher suite")
	}
}

func TestHardeningFieldsAreImplemented(t *testing.T) {
	c, err := loadFileT(t, header+"enableServer: false\nenableDebuggingHandlers: false\nreadOnlyPort: 10255\n"+
		"tlsMinVersion: VersionTLS13\ntlsCipherSuites: [TLS_AES_128_GCM_SHA256]\ntlsCurvePreferences: [29]\n"+
		"allowedUnsafeSysctls: [net.core.somaxconn]\nseccompDefault: true\npodPidsLimit: 100\nprotectKernelDefaults: true\n"+
		"imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\npreloadedImagesVerificationAllowlist: [registry.k8s.io/*]\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"enableServer", "enableDebuggingHandlers", "readOnlyPort", "tlsMinVersion", "tlsCipherSuites",
		"tlsCurvePreferences", "allowedUnsafeSysctls", "seccompDefault", "podPidsLimit", "protectKernelDefaults",
		"imagePullCredentialsVerificationPolicy", "preloadedImagesVerificationAllowlist"} {
		if hasNotice(c, MsgFieldNoEffect, "field="+f+" ") {
			t.Errorf("hardening field %s reported as having no effect: %v", f, c.Notices)
		}
	}
}

// podPidsLimit takes effect with both cgroup drivers (the systemd driver's pod slices get TasksMax and
// pids.max): no "no effect" notice for it.
func TestPodPidsLimitIsNotReportedWithEitherDriver(t *testing.T) {
	cases := []struct {
		name, body string
		notice     bool
	}{
		{"cgroupfs", "podPidsLimit: 100\n", false},
		{"systemd", "cgroupDriver: systemd\npodPidsLimit: 100\n", false},
		{"systemd without pod cgroups (no pod limit in the kubelet either)", "cgroupDriver: systemd\ncgroupsPerQOS: false\npodPidsLimit: 100\n", false},
		{"systemd without a limit", "cgroupDriver: systemd\npodPidsLimit: -1\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadFileT(t, header+tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if got := hasNotice(c, MsgFieldNoEffect, "field=podPidsLimit"); got != tc.notice {
				t.Errorf("podPidsLimit notice %v, want %v: %v", got, tc.notice, c.Notices)
			}
		})
	}
}
