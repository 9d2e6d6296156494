package config

import (
	"crypto/tls"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	cliflag "k8s.io/component-base/cli/flag"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/imagepull"
)

// TLS is the node API's TLS settings: tlsMinVersion, tlsCipherSuites and tlsCurvePreferences, parsed as the
// kubelet parses them (k8s.io/component-base/cli/flag: the cipher suite names Go and the kubelet know,
// VersionTLS10..VersionTLS13 with TLS 1.2 when unset, curve IDs Go supports).
type TLS struct {
	MinVersion       uint16
	CipherSuites     []uint16
	CurvePreferences []tls.CurveID
}

// ParseTLS parses the TLS settings of a KubeletConfiguration; errors name the field.
func ParseTLS(k *kubeletconfigv1beta1.KubeletConfiguration) (TLS, error) {
	var out TLS
	var err error
	if out.MinVersion, err = cliflag.TLSVersion(k.TLSMinVersion); err != nil {
		return TLS{}, fmt.Errorf("tlsMinVersion: %w", err)
	}
	if out.CipherSuites, err = cliflag.TLSCipherSuites(k.TLSCipherSuites); err != nil {
		return TLS{}, fmt.Errorf("tlsCipherSuites: %w", err)
	}
	if out.CurvePreferences, err = cliflag.TLSCurvePreferences(k.TLSCurvePreferences); err != nil {
		return TLS{}, fmt.Errorf("tlsCurvePreferences: %w", err)
	}
	return out, nil
}

// validateTLS checks each TLS setting on its own, so each bad value is named.
func validateTLS(k *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	if _, err := cliflag.TLSVersion(k.TLSMinVersion); err != nil {
		errs = append(errs, field.NotSupported(field.NewPath("tlsMinVersion"), k.TLSMinVersion, cliflag.TLSPossibleVersions()))
	}
	for i, name := range k.TLSCipherSuites {
		if _, err := cliflag.TLSCipherSuites([]string{name}); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("tlsCipherSuites").Index(i), name, err.Error()))
		}
	}
	if _, err := cliflag.TLSCurvePreferences(k.TLSCurvePreferences); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("tlsCurvePreferences"), k.TLSCurvePreferences, err.Error()))
	}
	return errs
}

// EnsureSecretPulledImages reports whether the KubeletEnsureSecretPulledImages gate is on (the default
// since Kubernetes 1.35): images on the node are then checked against a pod's pull credentials.
func EnsureSecretPulledImages(k *kubeletconfigv1beta1.KubeletConfiguration) bool {
	return gateEnabled(k, gateEnsureSecretPulledImages)
}

// validateImagePullCredentials checks imagePullCredentialsVerificationPolicy and
// preloadedImagesVerificationAllowlist as the kubelet does, by the gate.
func validateImagePullCredentials(k *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	policy := field.NewPath("imagePullCredentialsVerificationPolicy")
	allow := field.NewPath("preloadedImagesVerificationAllowlist")
	if !EnsureSecretPulledImages(k) {
		var errs field.ErrorList
		if k.ImagePullCredentialsVerificationPolicy != "" {
			errs = append(errs, field.Forbidden(policy, "must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled"))
		}
		if len(k.PreloadedImagesVerificationAllowlist) > 0 {
			errs = append(errs, field.Forbidden(allow, "must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled"))
		}
		return errs
	}
	errs := validateEnum(string(k.ImagePullCredentialsVerificationPolicy), policy,
		string(kubeletconfigv1beta1.NeverVerify), string(kubeletconfigv1beta1.NeverVerifyPreloadedImages),
		string(kubeletconfigv1beta1.NeverVerifyAllowlistedImages), string(kubeletconfigv1beta1.AlwaysVerify))
	switch {
	case len(k.PreloadedImagesVerificationAllowlist) == 0:
	case k.ImagePullCredentialsVerificationPolicy != kubeletconfigv1beta1.NeverVerifyAllowlistedImages:
		errs = append(errs, field.Forbidden(allow, `can't be set if imagePullCredentialsVerificationPolicy is not "NeverVerifyAllowlistedImages"`))
	default:
		if err := imagepull.ValidateAllowlist(k.PreloadedImagesVerificationAllowlist); err != nil {
			errs = append(errs, field.Invalid(allow, k.PreloadedImagesVerificationAllowlist, "invalid image pattern: "+err.Error()))
		}
	}
	return errs
}
