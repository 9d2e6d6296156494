package podcertificates

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

const node = "node-a"

// podSource is a PodInformer the test drives.
type podSource struct {
	h atomic.Pointer[toolscache.ResourceEventHandler]
}

func (p *podSource) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	p.h.Store(&h)
	return nil, nil
}

func certPod(name, nodeName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: nodeName, ServiceAccountName: "default", Volumes: []corev1.Volume{{Name: "certs",
			VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/signer", KeyType: "ECDSAP256",
					CredentialBundlePath: "bundle.pem"}},
			}}}}}},
	}
}

// issue plays the signer: a certificate for the request's public key, and the Issued condition.
func issue(t *testing.T, pcr *certificatesv1.PodCertificateRequest) *certificatesv1.PodCertificateRequest {
	t.Helper()
	csr, err := x509.ParseCertificateRequest(pcr.Spec.StubPKCS10Request)
	if err != nil {
		t.Fatalf("stub PKCS#10 request: %v", err)
	}
	if err := csr.CheckSignature(); err != nil {
		t.Fatalf("proof of possession: %v", err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: pcr.Spec.PodName}, NotBefore: now,
		NotAfter: now.Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, csr.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	out := pcr.DeepCopy()
	out.Status = certificatesv1.PodCertificateRequestStatus{
		CertificateChain: "junk before\n" + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		NotBefore:        &metav1.Time{Time: now}, BeginRefreshAt: &metav1.Time{Time: now.Add(12 * time.Hour)},
		NotAfter: &metav1.Time{Time: now.Add(24 * time.Hour)},
		Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
			Reason: "Issued", LastTransitionTime: metav1.Now()}},
	}
	return out
}

// TestIssue: a pod of this node with a podCertificate source gets a PodCertificateRequest (owned by the
// pod, bound to its service account and node, with a proof of possession); once the signer issues it, the
// credential bundle is the private key matching the certificate, then the chain cleaned of stray text; a
// denial is the source's error and a Warning event; a deleted pod's credentials are forgotten. Pods of
// other nodes and pods without a podCertificate source start nothing.
func TestIssue(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "default", UID: "sa-uid"}},
	)
	var n atomic.Int32
	cs.PrependReactor("create", "podcertificaterequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pcr := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.PodCertificateRequest)
		pcr.Name = fmt.Sprintf("%s%d", pcr.GenerateName, n.Add(1)) // the fake clientset does not generate names
		pcr.CreationTimestamp = metav1.Now()
		return false, nil, nil
	})
	events := record.NewFakeRecorder(10)
	pods := &podSource{}
	m, err := New(Options{Client: cs, NodeName: node, Recorder: events, Pods: func(context.Context) (PodInformer, error) { return pods, nil }})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	go func() { _ = m.Start(ctx) }()
	g.Eventually(pods.h.Load).ShouldNot(gomega.BeNil())
	h := *pods.h.Load()

	other := certPod("elsewhere", "node-b")
	h.OnAdd(other, false)
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain", UID: "plain"}, Spec: corev1.PodSpec{NodeName: node}}
	h.OnAdd(plain, false)
	g.Expect(m.started).To(gomega.BeFalse(), "no pod of this node has a podCertificate source: no watches")

	pod := certPod("web", node)
	h.OnAdd(pod, false)
	list := func() []certificatesv1.PodCertificateRequest {
		l, err := cs.CertificatesV1().PodCertificateRequests("ns").List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return l.Items
	}
	g.Eventually(list).WithTimeout(10 * time.Second).Should(gomega.HaveLen(1))
	pcr := list()[0]
	g.Expect(pcr.Spec.PodName).To(gomega.Equal("web"))
	g.Expect(pcr.Spec.PodUID).To(gomega.Equal(pod.UID))
	g.Expect(string(pcr.Spec.ServiceAccountUID)).To(gomega.Equal("sa-uid"))
	g.Expect(string(pcr.Spec.NodeName)).To(gomega.Equal(node))
	g.Expect(string(pcr.Spec.NodeUID)).To(gomega.Equal("node-uid"))
	g.Expect(pcr.OwnerReferences).To(gomega.HaveLen(1))
	g.Expect(pcr.OwnerReferences[0].UID).To(gomega.Equal(pod.UID))
	_, _, err = m.GetPodCertificateCredentialBundle(ctx, "ns", "web", string(pod.UID), "certs", 1)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("not issued yet")))

	done := issue(t, &pcr)
	_, err = cs.CertificatesV1().PodCertificateRequests("ns").UpdateStatus(ctx, done, metav1.UpdateOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var key, chain []byte
	g.Eventually(func() error {
		key, chain, err = m.GetPodCertificateCredentialBundle(ctx, "ns", "web", string(pod.UID), "certs", 1)
		return err
	}).WithTimeout(10 * time.Second).Should(gomega.Succeed())
	g.Expect(string(chain)).To(gomega.HavePrefix("-----BEGIN CERTIFICATE-----"), "text around the blocks is dropped")
	blk, _ := pem.Decode(key)
	g.Expect(blk).NotTo(gomega.BeNil())
	g.Expect(blk.Type).To(gomega.Equal("PRIVATE KEY"))
	priv, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	cblk, _ := pem.Decode(chain)
	cert, err := x509.ParseCertificate(cblk.Bytes)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(cert.PublicKey.(*ecdsa.PublicKey).Equal(priv.(*ecdsa.PrivateKey).Public())).To(gomega.BeTrue(), "the key is the certificate's")
	g.Expect(testutil.CollectAndCount(m.Collector())).To(gomega.Equal(1))
	g.Expect(testutil.ToFloat64(m.Collector())).To(gomega.Equal(1.0))

	// A second pod, denied.
	denied := certPod("denied", node)
	h.OnAdd(denied, false)
	var req certificatesv1.PodCertificateRequest
	g.Eventually(func() bool {
		for _, r := range list() {
			if r.Spec.PodName == "denied" {
				req = r
				return true
			}
		}
		return false
	}).WithTimeout(10 * time.Second).Should(gomega.BeTrue())
	req.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeDenied, Status: metav1.ConditionTrue,
		Reason: "Policy", Message: "not this one", LastTransitionTime: metav1.Now()}}
	_, err = cs.CertificatesV1().PodCertificateRequests("ns").UpdateStatus(ctx, &req, metav1.UpdateOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Eventually(func() error {
		_, _, err := m.GetPodCertificateCredentialBundle(ctx, "ns", "denied", string(denied.UID), "certs", 1)
		return err
	}).WithTimeout(10 * time.Second).Should(gomega.MatchError(gomega.ContainSubstring(`permanently denied: reason="Policy"`)))
	g.Eventually(events.Events).Should(gomega.Receive(gomega.SatisfyAll(gomega.HavePrefix("Warning Denied"), gomega.ContainSubstring("not this one"))))

	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/web", Obj: pod})
	_, _, err = m.GetPodCertificateCredentialBundle(ctx, "ns", "web", string(pod.UID), "certs", 1)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("no credentials yet")))
	for _, r := range list() {
		g.Expect(strings.HasPrefix(r.Spec.PodName, "elsewhere") || r.Spec.PodName == "plain").To(gomega.BeFalse())
	}
}
