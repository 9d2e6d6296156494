package volumes

import (
	"context"
	"errors"
	"maps"

	corev1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// errClusterTrustBundle: a clusterTrustBundle projection with no TrustBundles to read them from;
// errPodCertificate: a podCertificate projection with no PodCertificates to issue them (a node without
// an API server).
var (
	errClusterTrustBundle = errors.New("clusterTrustBundle projection is not supported")
	errPodCertificate     = errors.New("podCertificate projection is not supported: the node has no API server to request certificates from")
)

// setUpProjected gathers the sources of a projected volume into one payload and writes it; a source
// that fails fails the volume (its message lists every failed source).
func (m sourceVolumes) setUpProjected(ctx context.Context, pod *corev1.Pod, name string, src *corev1.ProjectedVolumeSource, pv *podVolumes) error {
	defaultMode := modeOr(src.DefaultMode)
	payload := map[string]fileProjection{}
	var errs []error
	for i := range src.Sources {
		part, err := m.srcv().projection(ctx, pod, name, i, &src.Sources[i], defaultMode, pv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		maps.Copy(payload, part)
	}
	if len(errs) > 0 {
		return utilerrors.NewAggregate(errs)
	}
	return m.srcv().writeVolume(pod, name, projectionVolume, payload)
}

func (m sourceVolumes) projection(ctx context.Context, pod *corev1.Pod, volumeName string, sourceIndex int, p *corev1.VolumeProjection, defaultMode int32, pv *podVolumes) (map[string]fileProjection, error) {
	switch {
	case p.Secret != nil:
		return m.srcv().secretPayload(ctx, pod.Namespace, p.Secret.Name, p.Secret.Items, p.Secret.Optional, defaultMode)
	case p.ConfigMap != nil:
		return m.srcv().configMapPayload(ctx, pod.Namespace, p.ConfigMap.Name, p.ConfigMap.Items, p.ConfigMap.Optional, defaultMode)
	case p.DownwardAPI != nil:
		return downwardAPIPayload(pod, p.DownwardAPI.Items, defaultMode, m.allocatable)
	case p.ServiceAccountToken != nil:
		return m.srcv().tokenPayload(ctx, pod, p.ServiceAccountToken, defaultMode, pv)
	case p.ClusterTrustBundle != nil:
		return m.srcv().trustBundlePayload(ctx, pod, p.ClusterTrustBundle, defaultMode)
	case p.PodCertificate != nil:
		return m.srcv().podCertificatePayload(ctx, pod, volumeName, sourceIndex, p.PodCertificate, defaultMode)
	}
	return nil, nil
}
