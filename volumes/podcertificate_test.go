package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// issued is a PodCertificates holding one credential bundle per pod, volume and source index.
type issued map[string][2][]byte

func (i issued) GetPodCertificateCredentialBundle(_ context.Context, namespace, podName, podUID, volumeName string, sourceIndex int) ([]byte, []byte, error) {
	b, ok := i[fmt.Sprintf("%s/%s/%s/%s/%d", namespace, podName, podUID, volumeName, sourceIndex)]
	if !ok {
		return nil, nil, errors.New("credential bundle is not issued yet")
	}
	return b[0], b[1], nil
}

// TestProjectedPodCertificate: the credential bundle (key then chain), the key and the chain land where
// the source's paths say, each source's own by its index in the volume; the mode is the volume's, 0600 with
// an fsGroup (then g+r); a bundle not issued yet fails the volume with the issuer's reason, and a node with
// no issuer says so.
func TestProjectedPodCertificate(t *testing.T) {
	const key, chain = "-----BEGIN PRIVATE KEY-----\nk\n-----END PRIVATE KEY-----\n", "-----BEGIN CERTIFICATE-----\nc\n-----END CERTIFICATE-----\n"
	for _, fsGroup := range []*int64{nil, ptrTo[int64](2000)} {
		t.Run(fmt.Sprintf("fsGroup=%v", fsGroup != nil), func(t *testing.T) {
			env := newTestEnv(t)
			pod := newPod(vol("certs", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
				{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519",
					CredentialBundlePath: "bundle.pem", KeyPath: "key.pem", CertificateChainPath: "chain.pem"}},
			}}}))
			pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: fsGroup}
			env.m.PodCertificates = issued{fmt.Sprintf("%s/%s/%s/certs/1", pod.Namespace, pod.Name, pod.UID): {[]byte(key), []byte(chain)}}
			if errs := env.m.SetUp(context.Background(), pod); len(errs) > 0 {
				t.Fatal(errs)
			}
			dir := must(env.m.volumeDir(pod.UID, pluginProjected, "certs"))
			wantMode := os.FileMode(0o644)
			if fsGroup != nil {
				wantMode = 0o640
			}
			for name, want := range map[string]string{"bundle.pem": key + chain, "key.pem": key, "chain.pem": chain} {
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
				if m := modeOf(t, filepath.Join(dir, name)).Perm(); m != wantMode {
					t.Errorf("%s mode = %o, want %o", name, m, wantMode)
				}
			}
		})
	}
	t.Run("not issued yet", func(t *testing.T) {
		env := newTestEnv(t)
		env.m.PodCertificates = issued{}
		pod := newPod(vol("certs", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", CredentialBundlePath: "b.pem"}}}}}))
		if errs := env.m.SetUp(context.Background(), pod); len(errs) != 1 || !strings.Contains(errs[0].Error(), "not issued yet") {
			t.Fatalf("errors = %v", errs)
		}
	})
	t.Run("no issuer", func(t *testing.T) {
		env := newTestEnv(t)
		pod := newPod(vol("certs", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", CredentialBundlePath: "b.pem"}}}}}))
		if errs := env.m.SetUp(context.Background(), pod); len(errs) != 1 || !strings.Contains(errs[0].Error(), "podCertificate projection is not supported") {
			t.Fatalf("errors = %v", errs)
		}
	})
}
