package testnode

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nodelet/nodelet/simnode"
)

// NodeAPI is how a test node's API authenticates the API server (Options.NodeAPI).
type NodeAPI = simnode.NodeAPI

// Kubelets is the API server's side of test nodes' APIs: the client certificate it presents to nodes (also
// usable by a test to call a node directly) and the options nodes are started with to trust it.
type Kubelets struct {
	// NodeAPI is what to set as Options.NodeAPI.
	NodeAPI *NodeAPI
	// ClientCertificate is the API server's kubelet client certificate (user kube-apiserver-kubelet-client,
	// group system:masters).
	ClientCertificate tls.Certificate
}

// ServeNodeAPIs configures env, before it starts, so that its API server reaches test nodes' APIs as a
// cluster's reaches its kubelets (kubectl logs, exec, the node proxy): it makes a CA and a client certificate
// in dir and sets kube-apiserver's --kubelet-client-certificate and --kubelet-client-key, and has it reach nodes
// at their InternalIP (as kubeadm's clusters do; a test node's name does not resolve). Nodes started with
// the returned NodeAPI authenticate it by that certificate and authorize it through the API server.
func ServeNodeAPIs(env *envtest.Environment, dir string) (*Kubelets, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "testnode-kubelet-client-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject:   pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"kubelet-client-ca.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		"kubelet-client.crt":    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"kubelet-client.key":    pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, fmt.Errorf("testnode: %w", err)
		}
	}
	cert, err := tls.X509KeyPair(files["kubelet-client.crt"], files["kubelet-client.key"])
	if err != nil {
		return nil, err
	}
	env.ControlPlane.GetAPIServer().Configure().
		Set("kubelet-client-certificate", filepath.Join(dir, "kubelet-client.crt")).
		Set("kubelet-client-key", filepath.Join(dir, "kubelet-client.key")).
		Set("kubelet-preferred-address-types", "InternalIP,Hostname") // test nodes' names do not resolve
	return &Kubelets{NodeAPI: &NodeAPI{ClientCAFile: filepath.Join(dir, "kubelet-client-ca.crt")}, ClientCertificate: cert}, nil
}
