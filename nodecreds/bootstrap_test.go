package nodecreds

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
)

// selfSigned writes a self-signed certificate (client-go's, valid for a year from now) and its key into one
// PEM file and returns its path.
func selfSigned(t *testing.T, dir string) string {
	t.Helper()
	cert, key, err := certutil.GenerateSelfSignedCertKey("n1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "pair.pem")
	if err := os.WriteFile(path, append(cert, key...), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWrittenKubeconfigIsValidUntilItsCertificateExpires writes the kubeconfig a bootstrap leaves and reads
// it back: the bootstrap's server and CA, the pair's path, valid before the certificate's end and not after.
func TestWrittenKubeconfigIsValidUntilItsCertificateExpires(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	pair := selfSigned(t, dir)
	kubeconfig := filepath.Join(dir, "kubelet.conf")
	log := logr.Discard()
	if clientConfigValid(log, kubeconfig, now) {
		t.Fatal("a missing kubeconfig is valid")
	}
	ca, err := os.ReadFile(pair) // the certificate doubles as the CA: TLSConfigFor parses it
	if err != nil {
		t.Fatal(err)
	}
	boot := &rest.Config{Host: "https://10.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	if err := writeClientKubeconfig(boot, kubeconfig, pair); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadRESTConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != boot.Host || string(cfg.CAData) != string(ca) || cfg.CertFile != pair || cfg.KeyFile != pair {
		t.Errorf("kubeconfig read back: host %q CA %q cert %q key %q", cfg.Host, cfg.CAData, cfg.CertFile, cfg.KeyFile)
	}
	if !clientConfigValid(log, kubeconfig, now) {
		t.Error("kubeconfig with an unexpired certificate is not valid")
	}
	if clientConfigValid(log, kubeconfig, now.AddDate(2, 0, 0)) {
		t.Error("kubeconfig with an expired certificate is valid")
	}
}

// TestBootstrapKeyIsKeptUntilTheCertificateIsStored: with no certificate a key is made and kept in the
// temporary file, and a second bootstrap (after a restart) requests with the same key.
func TestBootstrapKeyIsKeptUntilTheCertificateIsStored(t *testing.T) {
	dir := t.TempDir()
	store, err := certificate.NewFileStore(clientStorePrefix, dir, dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	first, path, err := bootstrapKey(store, dir)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, "kubelet-client.key.tmp") {
		t.Errorf("key path %s", path)
	}
	second, _, err := bootstrapKey(store, dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(first) != string(second) {
		t.Error("a second bootstrap made another key")
	}
}

// TestCSRNameIsADigestOfTheRequest: the same request is named the same; another key or usage is not.
func TestCSRNameIsADigestOfTheRequest(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	subject := &pkix.Name{Organization: []string{"system:nodes"}, CommonName: "system:node:n1"}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	name := func(k *ecdsa.PrivateKey, u []certificatesv1.KeyUsage) string {
		n, err := csrName(k.Public(), subject, u)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a, b := name(k1, usages), name(k1, usages)
	if a != b || len(a) != len("node-csr-")+43 {
		t.Errorf("names %q and %q", a, b)
	}
	if name(k2, usages) == a || name(k1, usages[:1]) == a {
		t.Error("a different key or usage gives the same name")
	}
}
