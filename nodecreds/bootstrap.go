package nodecreds

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/transport"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"

	"github.com/nodelet/nodelet/internal/kubeclient"
)

// The kubelet's TLS bootstrap, on client-go's CSR, key and certificate store helpers with the agent's
// four-group API client (the kubelet's bootstrap package builds client-go's every-group Clientset, which
// would link 5 MB of API clients the node never calls). Its files and behaviour are the kubelet's: the key
// waits in kubelet-client.key.tmp until the CSR is signed (so a restart reuses it), the signed pair goes to
// kubelet-client-current.pem through the store, and --kubeconfig is rewritten to point at it.

const (
	// clientStorePrefix is the store's file prefix in --cert-dir, the kubelet's.
	clientStorePrefix = "kubelet-client"
	// bootstrapKeyFile holds the private key of a CSR not yet signed.
	bootstrapKeyFile = "kubelet-client.key.tmp"
	// certificateWait is how long a bootstrap waits for its CSR to be signed, the kubelet's hour.
	certificateWait = time.Hour
)

// bootstrapClientCert gets the node a client certificate with the bootstrap kubeconfig unless kubeconfig
// already holds one that has not expired at now, and writes kubeconfig to use it.
func bootstrapClientCert(ctx context.Context, log logr.Logger, kubeconfig, bootstrapKubeconfig, certDir, nodeName string, now time.Time) error {
	if clientConfigValid(log, kubeconfig, now) {
		log.V(2).Info("Kubeconfig exists and is valid, skipping bootstrap", "path", kubeconfig)
		return nil
	}
	log.V(2).Info("Using bootstrap kubeconfig to generate TLS client cert, key and kubeconfig file")
	bootCfg, err := loadRESTConfig(bootstrapKubeconfig)
	if err != nil {
		return fmt.Errorf("unable to load bootstrap kubeconfig: %w", err)
	}
	client, err := kubeclient.NewForConfig(bootCfg)
	if err != nil {
		return fmt.Errorf("unable to create certificates signing request client: %w", err)
	}
	store, err := certificate.NewFileStore(clientStorePrefix, certDir, certDir, "", "")
	if err != nil {
		return fmt.Errorf("unable to build bootstrap cert store: %w", err)
	}
	keyData, keyPath, err := bootstrapKey(store, certDir)
	if err != nil {
		return err
	}
	waitForServer(ctx, log, client, time.Minute)
	certData, err := requestClientCertificate(ctx, log, client, keyData, nodeName)
	if err != nil {
		return err
	}
	if _, err := store.Update(certData, keyData); err != nil {
		return err
	}
	if err := os.Remove(keyPath); err != nil && !os.IsNotExist(err) {
		log.V(2).Info("Failed cleaning up private key file", "path", keyPath, "err", err)
	}
	return writeClientKubeconfig(bootCfg, kubeconfig, store.CurrentPath())
}

// bootstrapKey is the key to request the certificate for: the store's current one if it parses, else the
// key kept for a pending CSR, else a new one written there first.
func bootstrapKey(store certificate.FileStore, certDir string) ([]byte, string, error) {
	keyPath := filepath.Join(certDir, bootstrapKeyFile)
	if cert, err := store.Current(); err == nil && cert.PrivateKey != nil {
		if data, err := keyutil.MarshalPrivateKeyToPEM(cert.PrivateKey); err == nil {
			if _, err := keyutil.ParsePrivateKeyPEM(data); err == nil {
				return data, keyPath, nil
			}
		}
	}
	data, _, err := keyutil.LoadOrGenerateKeyFile(keyPath)
	return data, keyPath, err
}

// clientConfigValid tells whether kubeconfig exists and its client certificates all load and are unexpired at
// now; why not is logged.
func clientConfigValid(log logr.Logger, kubeconfig string, now time.Time) bool {
	if _, err := os.Stat(kubeconfig); err != nil {
		return false
	}
	cfg, err := loadRESTConfig(kubeconfig)
	if err != nil {
		log.Info("Unable to read the existing kubeconfig, bootstrapping", "path", kubeconfig, "err", err)
		return false
	}
	tc, err := cfg.TransportConfig()
	if err == nil {
		_, err = transport.TLSConfigFor(tc) // loads the certificate files into tc
	}
	if err != nil {
		log.Info("Unable to load the existing kubeconfig's TLS configuration, bootstrapping", "path", kubeconfig, "err", err)
		return false
	}
	certs, err := certutil.ParseCertsPEM(tc.TLS.CertData)
	if err != nil || len(certs) == 0 {
		log.Info("No client certificate in the existing kubeconfig, bootstrapping", "path", kubeconfig, "err", err)
		return false
	}
	for _, c := range certs {
		if now.After(c.NotAfter) {
			log.Info("The existing kubeconfig's client certificate has expired, bootstrapping", "path", kubeconfig, "notAfter", c.NotAfter)
			return false
		}
	}
	return true
}

// loadRESTConfig is the client configuration of the kubeconfig file at path, its current context.
func loadRESTConfig(path string) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	loaded, err := rules.Load()
	if err != nil {
		return nil, err
	}
	return clientcmd.NewNonInteractiveClientConfig(*loaded, loaded.CurrentContext, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
}

// waitForServer polls the API server's /healthz every 2 s for up to timeout; the CSR is made either way.
func waitForServer(ctx context.Context, log logr.Logger, client *kubeclient.Clientset, timeout time.Duration) {
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		reqCtx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := client.CoreV1().RESTClient().Get().AbsPath("/healthz").DoRaw(reqCtx); err != nil {
			log.Info("Failed to connect to apiserver", "err", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		log.Info("Error waiting for apiserver to come up", "err", err)
	}
}

// requestClientCertificate makes the node's kubernetes.io/kube-apiserver-client-kubelet CSR for
// system:node:<nodeName> in system:nodes and waits for its certificate. The CSR's name is a digest of what
// it asks for, so that a restart finds its pending request instead of making another.
func requestClientCertificate(ctx context.Context, log logr.Logger, client *kubeclient.Clientset, keyData []byte, nodeName string) ([]byte, error) {
	subject := &pkix.Name{Organization: []string{"system:nodes"}, CommonName: "system:node:" + nodeName}
	key, err := keyutil.ParsePrivateKeyPEM(keyData)
	if err != nil {
		return nil, fmt.Errorf("invalid private key for certificate request: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("private key does not implement crypto.Signer")
	}
	csrData, err := certutil.MakeCSR(key, subject, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("unable to generate certificate request: %w", err)
	}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	if _, ok := key.(*rsa.PrivateKey); ok {
		usages = append(usages, certificatesv1.UsageKeyEncipherment)
	}
	name, err := csrName(signer.Public(), subject, usages)
	if err != nil {
		return nil, err
	}
	reqName, reqUID, err := csr.RequestCertificateWithContext(ctx, client, csrData, name, certificatesv1.KubeAPIServerClientKubeletSignerName, nil, usages, key)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, certificateWait)
	defer cancel()
	log.V(2).Info("Waiting for client certificate to be issued", "csr", reqName)
	return csr.WaitForCertificate(ctx, client, reqName, reqUID)
}

// csrName is "node-csr-" and a SHA-512/256 digest of the public key, the subject's common name and
// organizations and the usages, each base64url-encoded and delimited by a character outside that alphabet.
func csrName(publicKey crypto.PublicKey, subject *pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(publicKey)
	if err != nil {
		return "", err
	}
	h := sha512.New512_256()
	write := func(b []byte) {
		h.Write([]byte(base64.RawURLEncoding.EncodeToString(b)))
		h.Write([]byte{'|'})
	}
	write(der)
	write([]byte(subject.CommonName))
	orgs := append([]string(nil), subject.Organization...)
	sort.Strings(orgs)
	for _, o := range orgs {
		write([]byte(o))
	}
	for _, u := range usages {
		write([]byte(u))
	}
	return "node-csr-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)), nil
}

// writeClientKubeconfig writes kubeconfig: the bootstrap kubeconfig's server and CA, and the certificate and
// key at pemPath (the store's current pair).
func writeClientKubeconfig(boot *rest.Config, kubeconfig, pemPath string) error {
	caFile, caData := boot.CAFile, []byte{}
	if caFile == "" {
		caData = boot.CAData
	}
	return clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"default-cluster": {Server: boot.Host, InsecureSkipTLSVerify: boot.Insecure,
			CertificateAuthority: caFile, CertificateAuthorityData: caData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"default-auth": {ClientCertificate: pemPath, ClientKey: pemPath}},
		Contexts:       map[string]*clientcmdapi.Context{"default-context": {Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}},
		CurrentContext: "default-context",
	}, kubeconfig)
}
