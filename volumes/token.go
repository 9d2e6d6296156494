package volumes

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
)

const (
	defaultTokenExpirationSeconds int64 = 3600 // the API default of expirationSeconds
	minTokenExpirationSeconds     int64 = 600  // the API minimum
	maxTokenAge                         = 24 * time.Hour
	credentialFileModeWithFSGroup int32 = 0o600 // fsGroup ownership then adds g+r
)

// tokenPayload is the file of a serviceAccountToken projection: a token for the pod's service account,
// bound to the pod, from the TokenRequest API, requested again when due.
func (m sourceVolumes) tokenPayload(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection, defaultMode int32, pv *podVolumes) (map[string]fileProjection, error) {
	exp := defaultTokenExpirationSeconds
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	if exp < minTokenExpirationSeconds {
		return nil, fmt.Errorf("serviceAccountToken expirationSeconds %d is below the minimum of %d", exp, minTokenExpirationSeconds)
	}
	if m.NodeName != "" && pod.Spec.NodeName != m.NodeName {
		return nil, fmt.Errorf("cannot request a token for pod %s/%s: it is not bound to node %q", pod.Namespace, pod.Name, m.NodeName)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef: &authenticationv1.BoundObjectReference{
			APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
		},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tr, err := m.srcv().token(ctx, pod.Namespace, serviceAccountName(pod), req, pv)
	if err != nil {
		return nil, err
	}
	return map[string]fileProjection{src.Path: {Data: []byte(tr.Status.Token), Mode: credentialFileMode(pod, defaultMode)}}, nil
}

// credentialFileMode is the mode of a projected credential (a service account token, trust anchors): the
// volume's default mode, or 0600 when the pod has an fsGroup, whose ownership then adds g+r.
func credentialFileMode(pod *corev1.Pod, defaultMode int32) int32 {
	if fsGroup(pod) != nil {
		return credentialFileModeWithFSGroup
	}
	return defaultMode
}

func serviceAccountName(pod *corev1.Pod) string {
	if pod.Spec.ServiceAccountName == "" {
		return "default"
	}
	return pod.Spec.ServiceAccountName
}

// token returns the pod's cached token for the request, or a new one when the cached one is due for a
// refresh (the kubelet's token manager). When a refresh fails, the old token is used while it is valid.
func (m sourceVolumes) token(ctx context.Context, namespace, sa string, req *authenticationv1.TokenRequest, pv *podVolumes) (*authenticationv1.TokenRequest, error) {
	key := tokenKey(sa, req)
	cached, ok := pv.tokens[key]
	now := m.clock().Now()
	if ok && !requiresRefresh(cached, now) {
		return cached, nil
	}
	tr, err := m.Objects.CreateToken(ctx, namespace, sa, req.DeepCopy())
	switch {
	case err == nil:
	case !ok:
		return nil, fmt.Errorf("failed to fetch token: %w", err)
	case now.After(cached.Status.ExpirationTimestamp.Time):
		return nil, fmt.Errorf("token %s expired and refresh failed: %w", key, err)
	default:
		logr.FromContextOrDiscard(ctx).Error(err, "Couldn't update token", "cacheKey", key)
		return cached, nil
	}
	if tr.Spec.ExpirationSeconds == nil {
		tr.Spec.ExpirationSeconds = req.Spec.ExpirationSeconds
	}
	pv.tokens[key] = tr
	return tr, nil
}

// requiresRefresh: a token is refreshed once 80% of its lifetime passed, or once it is older than 24
// hours, as the kubelet does (without its jitter of up to 10 s).
func requiresRefresh(tr *authenticationv1.TokenRequest, now time.Time) bool {
	if tr.Spec.ExpirationSeconds == nil {
		return false
	}
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	exp := tr.Status.ExpirationTimestamp.Time
	issued := exp.Add(-ttl)
	return now.After(issued.Add(maxTokenAge)) || now.After(exp.Add(-ttl/5))
}

// tokenKey identifies a token request within a pod: service account, audiences and expiry.
func tokenKey(sa string, req *authenticationv1.TokenRequest) string {
	var exp int64
	if req.Spec.ExpirationSeconds != nil {
		exp = *req.Spec.ExpirationSeconds
	}
	return fmt.Sprintf("%q/%q/%d", sa, strings.Join(req.Spec.Audiences, ","), exp)
}
