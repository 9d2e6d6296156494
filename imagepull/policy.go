package imagepull

import (
	"errors"
	"fmt"
	"strings"

	"github.com/distribution/reference"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Policy says whether an image's credentials must be verified before a pod may use it from the node.
// pulledByNodelet is true when a pulled record or a pull intent exists for the image (the kubelet's
// "pulled by the kubelet").
type Policy interface {
	RequireVerification(image string, pulledByNodelet bool) bool
}

// PolicyFunc adapts a function to Policy.
type PolicyFunc func(image string, pulledByNodelet bool) bool

// RequireVerification implements Policy.
func (f PolicyFunc) RequireVerification(image string, pulledByNodelet bool) bool {
	return f(image, pulledByNodelet)
}

// NewPolicy returns the policy named by imagePullCredentialsVerificationPolicy; allowlist is
// preloadedImagesVerificationAllowlist, used by NeverVerifyAllowlistedImages.
func NewPolicy(name kubeletconfigv1beta1.ImagePullCredentialsVerificationPolicy, allowlist []string) (Policy, error) {
	switch name {
	case kubeletconfigv1beta1.NeverVerify:
		return PolicyFunc(func(string, bool) bool { return false }), nil
	case kubeletconfigv1beta1.NeverVerifyPreloadedImages:
		return PolicyFunc(func(_ string, pulledByNodelet bool) bool { return pulledByNodelet }), nil
	case kubeletconfigv1beta1.NeverVerifyAllowlistedImages:
		return newAllowlist(allowlist)
	case kubeletconfigv1beta1.AlwaysVerify:
		return PolicyFunc(func(string, bool) bool { return true }), nil
	}
	return nil, fmt.Errorf("unknown image pull credential verification policy: %v", name)
}

// allowlist is NeverVerifyAllowlistedImages: images named exactly, or under a "<prefix>/*" pattern, are
// never verified; every other image always is.
type allowlist struct {
	exact    map[string]bool
	prefixes []string
}

func newAllowlist(patterns []string) (*allowlist, error) {
	a := &allowlist{exact: map[string]bool{}}
	for _, p := range patterns {
		name, wildcard, err := parsePattern(p)
		if err != nil {
			return nil, err
		}
		if wildcard {
			a.prefixes = append(a.prefixes, name)
		} else {
			a.exact[name] = true
		}
	}
	return a, nil
}

// RequireVerification implements Policy.
func (a *allowlist) RequireVerification(image string, _ bool) bool {
	name, err := TrimTagAndDigest(image)
	if err != nil {
		name = image // best effort, as the kubelet: match what the user wrote
	}
	if a.exact[name] {
		return false
	}
	for _, p := range a.prefixes {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	return true
}

// ValidateAllowlist checks preloadedImagesVerificationAllowlist patterns as the kubelet does.
func ValidateAllowlist(patterns []string) error {
	for _, p := range patterns {
		if _, _, err := parsePattern(p); err != nil {
			return err
		}
	}
	return nil
}

// parsePattern returns an allowlist pattern's image name (without tag or digest), or its prefix with the
// trailing "/" for a "<prefix>/*" wildcard.
func parsePattern(pattern string) (name string, wildcard bool, err error) {
	if pattern != strings.TrimSpace(pattern) {
		return "", false, fmt.Errorf("leading/trailing spaces are not allowed: %s", pattern)
	}
	trimmed, wildcard := strings.CutSuffix(pattern, "*")
	wildcard = wildcard && strings.HasSuffix(trimmed, "/")
	if !wildcard {
		trimmed = pattern
	}
	switch {
	case trimmed == "":
		return "", false, fmt.Errorf("the supplied pattern is too short: %s", pattern)
	case strings.ContainsRune(trimmed, '*'):
		return "", false, fmt.Errorf("not a valid wildcard pattern, only patterns ending with '/*' are allowed: %s", pattern)
	case wildcard && len(trimmed) == 1:
		return "", false, errors.New("at least registry hostname is required")
	case wildcard:
		return trimmed, true, nil
	}
	image, err := TrimTagAndDigest(trimmed)
	if err != nil {
		return "", false, fmt.Errorf("failed to parse as an image name: %w", err)
	}
	if image != trimmed {
		return "", false, fmt.Errorf("neither tag nor digest is accepted in an image reference: %s", pattern)
	}
	return trimmed, false, nil
}

// TrimTagAndDigest removes a tag and a digest from an image name as written (no default registry or tag
// is added): "reg/app:1@sha256:..." is "reg/app". Records key credentials by this name.
func TrimTagAndDigest(image string) (string, error) {
	parsed, err := reference.Parse(image)
	if err != nil {
		return "", err
	}
	if d, ok := parsed.(reference.Digested); ok {
		var found bool
		if image, found = strings.CutSuffix(image, "@"+d.Digest().String()); !found {
			return "", fmt.Errorf("digest was not specified last, this does not appear to be a valid image spec: %q", image)
		}
	}
	if t, ok := parsed.(reference.Tagged); ok {
		var found bool
		if image, found = strings.CutSuffix(image, ":"+t.Tag()); !found {
			return "", fmt.Errorf("tag %q was not specified last (or before the digest), this does not appear to be a valid image spec: %q", t.Tag(), image)
		}
	}
	return image, nil
}
