package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("Pod certificates and trust bundles", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("mounts a podCertificate projection once the signer issues the node's PodCertificateRequest", func() {
		ctx := context.Background()
		const signer = "e2e.nodelet.dev/signer"
		start := time.Now()
		p := create(shPod(ns, "certs", `cat /certs/chain.pem; grep -c "BEGIN PRIVATE KEY" /certs/bundle.pem; sleep 3600`, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{SignerName: signer, KeyType: "ED25519",
					CredentialBundlePath: "bundle.pem", CertificateChainPath: "chain.pem"}}}}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "certs", MountPath: "/certs"}}
		}))
		// The node asks: one request, owned by the pod, naming its node and service account.
		var pcr certificatesv1.PodCertificateRequest
		Eventually(func(g Gomega) {
			var l certificatesv1.PodCertificateRequestList
			g.Expect(k8s.List(ctx, &l, client.InNamespace(ns))).To(Succeed())
			g.Expect(l.Items).To(HaveLen(1))
			pcr = l.Items[0]
		}, 60*time.Second).Should(Succeed())
		Expect(string(pcr.Spec.NodeName)).To(Equal(nodeName))
		Expect(pcr.Spec.PodUID).To(Equal(p.UID))
		Expect(pcr.Spec.ServiceAccountName).To(Equal("default"))
		Expect(pcr.Spec.SignerName).To(Equal(signer))
		Expect(pcr.OwnerReferences).To(ContainElement(HaveField("UID", p.UID)))
		// Not issued yet: the pod waits in ContainerCreating.
		Consistently(func(g Gomega) {
			g.Expect(getPod(g, ns, "certs").Status.Phase).To(Equal(corev1.PodPending))
		}, 2*time.Second, 500*time.Millisecond).Should(Succeed())

		// The test is the signer.
		csr, err := x509.ParseCertificateRequest(pcr.Spec.StubPKCS10Request)
		Expect(err).NotTo(HaveOccurred())
		Expect(csr.CheckSignature()).To(Succeed(), "the request proves possession of the key")
		_, caKey, err := ed25519.GenerateKey(rand.Reader)
		Expect(err).NotTo(HaveOccurred())
		now := time.Now().Truncate(time.Second)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "e2e"}, NotBefore: now, NotAfter: now.Add(2 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, csr.PublicKey, caKey)
		Expect(err).NotTo(HaveOccurred())
		chain := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
		pcr.Status = certificatesv1.PodCertificateRequestStatus{CertificateChain: chain,
			NotBefore: &metav1.Time{Time: now}, BeginRefreshAt: &metav1.Time{Time: now.Add(time.Hour)}, NotAfter: &metav1.Time{Time: now.Add(2 * time.Hour)},
			Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
				Reason: "Issued", Message: "issued by the e2e signer", LastTransitionTime: metav1.Now()}}}
		Expect(k8s.Status().Update(ctx, &pcr)).To(Succeed())

		Eventually(func(g Gomega) {
			p = getPod(g, ns, "certs")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			log := containerLog(p, "main", 0)
			g.Expect(log).To(ContainSubstring(strings.Split(strings.TrimSpace(chain), "\n")[1]), "the issued chain")
			g.Expect(log).To(ContainSubstring(" F 1\n"), "one private key in the bundle")
		}, 60*time.Second).Should(Succeed())
		report("podCertificate: pod created → Running with its issued certificate in %.1fs (signer answered by the test)", time.Since(start).Seconds())
	})

	It("projects a ClusterTrustBundle chosen by signer and labels into a pod", func() {
		ctx := context.Background()
		_, key, err := ed25519.GenerateKey(rand.Reader)
		Expect(err).NotTo(HaveOccurred())
		now := time.Now().Truncate(time.Second)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(9), Subject: pkix.Name{CommonName: "e2e-ca-" + ns}, NotBefore: now,
			NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		Expect(err).NotTo(HaveOccurred())
		ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
		const signer = "e2e.nodelet.dev/bundles"
		ctb := &certificatesv1.ClusterTrustBundle{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e.nodelet.dev:bundles:" + ns, Labels: map[string]string{"e2e": ns}},
			Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: ca}}
		Expect(k8s.Create(ctx, ctb)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(context.Background(), ctb) })
		create(shPod(ns, "bundle", `cat /bundle/ca.pem; sleep 3600`, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "bundle", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptr.To(signer),
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e": ns}}, Path: "ca.pem"}}}}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "bundle", MountPath: "/bundle"}}
		}))
		Eventually(func(g Gomega) {
			p := getPod(g, ns, "bundle")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(containerLog(p, "main", 0)).To(ContainSubstring(strings.Split(strings.TrimSpace(ca), "\n")[1]))
		}, 60*time.Second).Should(Succeed())
	})
})
