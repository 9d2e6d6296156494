package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// statusWriter is a client for a service account of ns that may only patch pods/status there.
func statusWriter(cs *kubernetes.Clientset, cfg *rest.Config, ns string) *kubernetes.Clientset {
	ctx := context.Background()
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "writer"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "status-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"get", "patch"}}}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "status-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "status-writer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "writer", Namespace: ns}}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "writer", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	user := rest.AnonymousClientConfig(cfg)
	user.BearerToken = tok.Status.Token
	return kubernetes.NewForConfigOrDie(user)
}

// nodeGet reads a node API path as the cluster's admin (client certificate of the bed's PKI).
func nodeGet(path string) (int, string) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(bedDir, "pki", "admin.crt"), filepath.Join(bedDir, "pki", "admin.key"))
	Expect(err).NotTo(HaveOccurred())
	resp, err := nodeClient(cert).Get(nodeAPI + path)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(b)
}

var _ = Describe("A pod status forged by a namespace's user", func() {
	It("never opens another namespace's container logs, and the agent writes the status back", func() {
		ctx := context.Background()
		cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
		Expect(err).NotTo(HaveOccurred())
		cs := kubernetes.NewForConfigOrDie(cfg)
		victimNS, attackerNS := newNamespace(), newNamespace()
		secret := "secret-" + utilrand.String(8)
		victim := create(shPod(victimNS, "victim", "echo "+secret+"; sleep 3600"))
		mine := create(shPod(attackerNS, "mine", "echo mine; sleep 3600"))
		running := func(p *corev1.Pod) string {
			var id string
			Eventually(func(g Gomega) {
				got := getPod(g, p.Namespace, p.Name)
				g.Expect(got.Status.ContainerStatuses).To(HaveLen(1))
				g.Expect(got.Status.ContainerStatuses[0].State.Running).NotTo(BeNil())
				id = got.Status.ContainerStatuses[0].ContainerID
			}, 60*time.Second).Should(Succeed())
			return id
		}
		victimID, mineID := running(victim), running(mine)
		Eventually(func() string { return containerLog(victim, "main", 0) }, 20*time.Second).Should(ContainSubstring(secret))

		writer := statusWriter(cs, cfg, attackerNS)
		patch := fmt.Sprintf(`{"status":{"containerStatuses":[{"name":"main","containerID":%q,"image":"busybox","imageID":"",`+
			`"ready":true,"restartCount":0,"state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}},`+
			`"lastState":{"terminated":{"exitCode":0,"containerID":%q}}}]}}`, victimID, victimID)
		Eventually(func() error {
			_, err := writer.CoreV1().Pods(attackerNS).Patch(ctx, "mine", types.StrategicMergePatchType, []byte(patch),
				metav1.PatchOptions{}, "status")
			return err
		}, 20*time.Second).Should(Succeed(), "a user with pods/status in the namespace writes the other namespace's container ID")

		for _, q := range []string{"", "?previous=true"} {
			code, body := nodeGet("/containerLogs/" + attackerNS + "/mine/main" + q)
			Expect(body).NotTo(ContainSubstring(secret), "GET containerLogs%s = %d", q, code)
			if q == "" {
				Expect(code).To(Equal(http.StatusOK))
				Expect(strings.TrimSpace(body)).To(Equal("mine"))
			}
		}
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, attackerNS, "mine").Status.ContainerStatuses[0].ContainerID).To(Equal(mineID))
		}, 30*time.Second).Should(Succeed(), "the agent writes its own status back over the forged one")
	})
})
