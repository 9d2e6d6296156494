package volumes

import (
	"bytes"
	"context"

	corev1 "k8s.io/api/core/v1"
)

// PodCertificates holds the credentials of the pods' podCertificate projections: a private key made on
// the node and the certificate chain a signer issued for it through a PodCertificateRequest
// (podcertificates.Manager). A projection whose credentials are not issued yet fails its volume with the
// reason, and the pod waits, as the kubelet's.
type PodCertificates interface {
	GetPodCertificateCredentialBundle(ctx context.Context, namespace, podName, podUID, volumeName string, sourceIndex int) (privKey, certChain []byte, err error)
}

// podCertificatePayload is the files of the podCertificate projection at sourceIndex of the projected
// volume volumeName, as the kubelet writes them: the credential bundle (the PEM private key, then the
// certificate chain), the key alone and the chain alone, each where its path says. The files' mode is the
// volume's, or 0600 with an fsGroup.
func (m sourceVolumes) podCertificatePayload(ctx context.Context, pod *corev1.Pod, volumeName string, sourceIndex int, src *corev1.PodCertificateProjection, defaultMode int32) (map[string]fileProjection, error) {
	if m.PodCertificates == nil {
		return nil, errPodCertificate
	}
	key, chain, err := m.PodCertificates.GetPodCertificateCredentialBundle(ctx, pod.Namespace, pod.Name, string(pod.UID), volumeName, sourceIndex)
	if err != nil {
		return nil, err
	}
	mode := credentialFileMode(pod, defaultMode)
	out := map[string]fileProjection{}
	if src.CredentialBundlePath != "" {
		var bundle bytes.Buffer
		bundle.Write(key)
		bundle.Write(chain)
		out[src.CredentialBundlePath] = fileProjection{Data: bundle.Bytes(), Mode: mode}
	}
	if src.KeyPath != "" {
		out[src.KeyPath] = fileProjection{Data: key, Mode: mode}
	}
	if src.CertificateChainPath != "" {
		out[src.CertificateChainPath] = fileProjection{Data: chain, Mode: mode}
	}
	return out, nil
}
