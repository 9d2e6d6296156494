package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

const nodeAPI = "https://127.0.0.1:10250"

// selfSignedCert is a client certificate no CA of the cluster signed, optionally already expired.
func selfSignedCert(expired bool) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	notAfter := time.Now().Add(time.Hour)
	if expired {
		notAfter = time.Now().Add(-time.Hour)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func nodeClient(certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: certs, InsecureSkipVerify: true}}} //nolint:gosec // test
}

func status(c *http.Client, method, path, token string, body []byte) int {
	req, err := http.NewRequest(method, nodeAPI+path, bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	return resp.StatusCode
}

var _ = Describe("Node API security on the real server", func() {
	It("refuses a client certificate from a foreign CA and an expired one (401)", func() {
		for _, expired := range []bool{false, true} {
			Expect(status(nodeClient(selfSignedCert(expired)), http.MethodGet, "/pods", "", nil)).To(Equal(http.StatusUnauthorized))
		}
		cert, err := tls.LoadX509KeyPair(filepath.Join(bedDir, "pki", "admin.crt"), filepath.Join(bedDir, "pki", "admin.key"))
		Expect(err).NotTo(HaveOccurred())
		Expect(status(nodeClient(cert), http.MethodGet, "/pods", "", nil)).To(Equal(http.StatusOK), "the cluster CA's admin cert is accepted")
	})

	It("refuses an oversized request body", func() {
		cert, err := tls.LoadX509KeyPair(filepath.Join(bedDir, "pki", "admin.crt"), filepath.Join(bedDir, "pki", "admin.key"))
		Expect(err).NotTo(HaveOccurred())
		Expect(status(nodeClient(cert), http.MethodPost, "/run/default/x/y", "", make([]byte, 4<<20))).To(Equal(http.StatusRequestEntityTooLarge))
	})

	It("maps nodes/log and nodes/proxy like the kubelet: log access does not open exec, proxy access does", func() {
		ns := newNamespace()
		ctx := context.Background()
		cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
		Expect(err).NotTo(HaveOccurred())
		cs := kubernetes.NewForConfigOrDie(cfg)
		grant := func(sa, subresource string) string {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			name := ns + "-" + sa
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/" + subresource}, Verbs: []string{"*"}}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() {
				_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
				_ = cs.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
			tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
				Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			return tok.Status.Token
		}
		logs, proxy := grant("logs", "log"), grant("proxy", "proxy")
		c := nodeClient()
		exec := "/exec/" + ns + "/nope/main?command=true&output=1"
		Eventually(func() int { return status(c, http.MethodGet, "/logs/", logs, nil) }, 20*time.Second).ShouldNot(Equal(http.StatusForbidden))
		Expect(status(c, http.MethodPost, exec, logs, nil)).To(Equal(http.StatusForbidden))
		Eventually(func() int { return status(c, http.MethodPost, exec, proxy, nil) }, 20*time.Second).ShouldNot(Equal(http.StatusForbidden))
		Expect(status(c, http.MethodGet, "/pods", proxy, nil)).To(Equal(http.StatusOK))
	})
})
