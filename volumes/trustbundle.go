package volumes

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TrustBundles reads ClusterTrustBundles (certificates.k8s.io/v1) for clusterTrustBundle projections. The
// Manager uses it when its Objects implements it; without it such a projection fails the volume.
type TrustBundles interface {
	GetClusterTrustBundle(ctx context.Context, name string) (*certificatesv1.ClusterTrustBundle, error)
	ListClusterTrustBundles(ctx context.Context, selector labels.Selector) ([]certificatesv1.ClusterTrustBundle, error)
}

// maxLabelSelectorLength bounds a projection's label selector, as the kubelet's.
const maxLabelSelectorLength = 100 * 1024

// trustBundlePayload is the file of a clusterTrustBundle projection, as the kubelet writes it: the
// certificates of the bundle named, or of every bundle of the signer that the label selector matches (a nil
// selector matches none, an empty one all), each certificate once, PEM-encoded. A bundle missing, or no
// bundle matched, is an empty file when the projection is optional and an error otherwise. The file's mode
// is the volume's, or 0600 with an fsGroup.
func (m sourceVolumes) trustBundlePayload(ctx context.Context, pod *corev1.Pod, src *corev1.ClusterTrustBundleProjection, defaultMode int32) (map[string]fileProjection, error) {
	tb, ok := m.Objects.(TrustBundles)
	if !ok {
		return nil, errClusterTrustBundle
	}
	allowMissing := isTrue(src.Optional)
	var bundles []certificatesv1.ClusterTrustBundle
	switch {
	case src.Name != nil:
		ctb, err := tb.GetClusterTrustBundle(ctx, *src.Name)
		switch {
		case apierrors.IsNotFound(err) && allowMissing:
		case err != nil:
			return nil, fmt.Errorf("while getting ClusterTrustBundle: %w", err)
		default:
			bundles = append(bundles, *ctb)
		}
	case src.SignerName != nil:
		selector, err := metav1.LabelSelectorAsSelector(src.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("while parsing label selector: %w", err)
		}
		if n := len(selector.String()); n > maxLabelSelectorLength {
			return nil, fmt.Errorf("label selector length (%d) is larger than %d", n, maxLabelSelectorLength)
		}
		if src.LabelSelector != nil {
			all, err := tb.ListClusterTrustBundles(ctx, selector)
			if err != nil {
				return nil, fmt.Errorf("while listing ClusterTrustBundles matching label selector %v: %w", src.LabelSelector, err)
			}
			for _, ctb := range all {
				if ctb.Spec.SignerName == *src.SignerName {
					bundles = append(bundles, ctb)
				}
			}
		}
		if len(bundles) == 0 && !allowMissing {
			return nil, errors.New("combination of signerName and labelSelector matched zero ClusterTrustBundles")
		}
	default:
		return nil, errors.New("ClusterTrustBundle projection requires either name or signerName to be set")
	}
	return map[string]fileProjection{src.Path: {Data: trustAnchors(bundles), Mode: credentialFileMode(pod, defaultMode)}}, nil
}

// trustAnchors is the certificates of bundles, each once, PEM-encoded, in an order of their own (the
// kubelet shuffles it, so that no reader depends on one).
func trustAnchors(bundles []certificatesv1.ClusterTrustBundle) []byte {
	seen := map[string]bool{}
	var ders []string
	for _, ctb := range bundles {
		rest := []byte(ctb.Spec.TrustBundle)
		for {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			if !seen[string(b.Bytes)] {
				seen[string(b.Bytes)] = true
				ders = append(ders, string(b.Bytes))
			}
		}
	}
	slices.Sort(ders)
	rand.Shuffle(len(ders), func(i, j int) { ders[i], ders[j] = ders[j], ders[i] })
	out := []byte{}
	for _, der := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(der)})...)
	}
	return out
}

// GetClusterTrustBundle returns the ClusterTrustBundle name from TrustBundles' cache.
func (c *CachedObjects) GetClusterTrustBundle(ctx context.Context, name string) (*certificatesv1.ClusterTrustBundle, error) {
	if c.TrustBundles == nil {
		return nil, errClusterTrustBundle
	}
	var ctb certificatesv1.ClusterTrustBundle
	if err := c.TrustBundles.Get(ctx, client.ObjectKey{Name: name}, &ctb); err != nil {
		return nil, err
	}
	return &ctb, nil
}

// ListClusterTrustBundles returns the ClusterTrustBundles selector matches, from TrustBundles' cache.
func (c *CachedObjects) ListClusterTrustBundles(ctx context.Context, selector labels.Selector) ([]certificatesv1.ClusterTrustBundle, error) {
	if c.TrustBundles == nil {
		return nil, errClusterTrustBundle
	}
	var l certificatesv1.ClusterTrustBundleList
	if err := c.TrustBundles.List(ctx, &l, client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, err
	}
	return l.Items, nil
}
