package volumes

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// withBundles is the test's Objects with ClusterTrustBundles read through CachedObjects from a fake client.
type withBundles struct {
	*fakeObjects
	bundles *CachedObjects
}

func (w withBundles) GetClusterTrustBundle(ctx context.Context, name string) (*certificatesv1.ClusterTrustBundle, error) {
	return w.bundles.GetClusterTrustBundle(ctx, name)
}

func (w withBundles) ListClusterTrustBundles(ctx context.Context, s labels.Selector) ([]certificatesv1.ClusterTrustBundle, error) {
	return w.bundles.ListClusterTrustBundles(ctx, s)
}

// testCert is a self-signed certificate's DER named cn.
func testCert(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: testStart,
		NotAfter: testStart.Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func pemOf(ders ...[]byte) string {
	var b strings.Builder
	for _, d := range ders {
		b.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d}))
	}
	return b.String()
}

func ctb(name, signer string, lbls map[string]string, ders ...[]byte) *certificatesv1.ClusterTrustBundle {
	return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: pemOf(ders...)}}
}

// TestProjectedClusterTrustBundle follows the upstream conformance cases: by name, by signer and label
// selector (nil matches nothing, empty matches all of the signer's), certificates deduplicated across
// bundles, optional projections that match nothing give an empty file, required ones fail the volume with
// the kubelet's messages.
func TestProjectedClusterTrustBundle(t *testing.T) {
	a, b, c := testCert(t, "a"), testCert(t, "b"), testCert(t, "c")
	const signer = "example.com/signer"
	objs := []*certificatesv1.ClusterTrustBundle{
		ctb("one", "", nil, a),
		ctb("example.com:signer:alive1", signer, map[string]string{"alive": "true"}, a, b),
		ctb("example.com:signer:alive2", signer, map[string]string{"alive": "true"}, b),
		ctb("example.com:signer:dead", signer, map[string]string{"alive": "false"}, c),
		ctb("other.com:signer:x", "other.com/signer", map[string]string{"alive": "true"}, c),
	}
	builder := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme)
	for _, o := range objs {
		builder = builder.WithObjects(o)
	}
	reader := builder.Build()
	alive := &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "true"}}
	tests := []struct {
		name      string
		proj      corev1.ClusterTrustBundleProjection
		fsGroup   *int64
		want      [][]byte
		wantMode  uint32
		wantError string
	}{
		{name: "by name", proj: corev1.ClusterTrustBundleProjection{Name: ptrTo("one")}, want: [][]byte{a}, wantMode: 0o644},
		{name: "by name, fsGroup", proj: corev1.ClusterTrustBundleProjection{Name: ptrTo("one")}, fsGroup: ptrTo[int64](2000), want: [][]byte{a}, wantMode: 0o640},
		{name: "signer and labels, deduplicated", proj: corev1.ClusterTrustBundleProjection{SignerName: ptrTo(signer), LabelSelector: alive}, want: [][]byte{a, b}, wantMode: 0o644},
		{name: "signer, empty selector", proj: corev1.ClusterTrustBundleProjection{SignerName: ptrTo(signer), LabelSelector: &metav1.LabelSelector{}}, want: [][]byte{a, b, c}, wantMode: 0o644},
		{name: "signer, nil selector, optional", proj: corev1.ClusterTrustBundleProjection{SignerName: ptrTo(signer), Optional: ptrTo(true)}, wantMode: 0o644},
		{name: "missing name, optional", proj: corev1.ClusterTrustBundleProjection{Name: ptrTo("nope"), Optional: ptrTo(true)}, wantMode: 0o644},
		{name: "missing name", proj: corev1.ClusterTrustBundleProjection{Name: ptrTo("nope"), Optional: ptrTo(false)}, wantError: "while getting ClusterTrustBundle"},
		{
			name:      "nothing matched",
			proj:      corev1.ClusterTrustBundleProjection{SignerName: ptrTo(signer), LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "unknown"}}},
			wantError: "combination of signerName and labelSelector matched zero ClusterTrustBundles",
		},
		{name: "neither name nor signer", proj: corev1.ClusterTrustBundleProjection{}, wantError: "requires either name or signerName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			env.m.Objects = withBundles{env.objects, &CachedObjects{TrustBundles: reader}}
			tt.proj.Path = "ca.crt"
			pod := newPod(vol("p", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &tt.proj}}}}))
			pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: tt.fsGroup}
			errs := env.m.SetUp(context.Background(), pod)
			if tt.wantError != "" {
				if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.wantError) {
					t.Fatalf("errors = %v, want %q", errs, tt.wantError)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			path := filepath.Join(must(env.m.volumeDir(pod.UID, pluginProjected, "p")), "ca.crt")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for rest := data; ; {
				var blk *pem.Block
				if blk, rest = pem.Decode(rest); blk == nil {
					if len(strings.TrimSpace(string(rest))) > 0 {
						t.Errorf("trailing bytes %q", rest)
					}
					break
				}
				got = append(got, string(blk.Bytes))
			}
			var want []string
			for _, d := range tt.want {
				want = append(want, string(d))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("file holds %d certificates, want %d (%v)", len(got), len(want), tt.want != nil)
			}
			if m := modeOf(t, path).Perm(); uint32(m) != tt.wantMode {
				t.Errorf("mode = %o, want %o", m, tt.wantMode)
			}
		})
	}
}

// TestProjectedClusterTrustBundleWithoutSource: a node with no TrustBundles fails the volume with a clear
// message.
func TestProjectedClusterTrustBundleWithoutSource(t *testing.T) {
	env := newTestEnv(t)
	pod := newPod(vol("p", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptrTo("one"), Path: "ca.crt"}}}}}))
	errs := env.m.SetUp(context.Background(), pod)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "clusterTrustBundle projection is not supported") {
		t.Fatalf("errors = %v", errs)
	}
}
