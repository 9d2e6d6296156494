package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/podrules"
)

// kubectl runs the bed's kubectl and returns its combined output and exit code.
func kubectl(args ...string) (string, int) {
	bin := os.Getenv("KUBECTL")
	Expect(bin).NotTo(BeEmpty(), "KUBECTL names the bed's kubectl (hack/e2e.sh sets it)")
	out, err := exec.Command(bin, args...).CombinedOutput()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return string(out), exitErr.ExitCode()
	}
	Expect(err).NotTo(HaveOccurred())
	return string(out), 0
}

var _ = Describe("Node API through the API server", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("serves kubectl logs (--tail, --timestamps, --previous) and exec with exit codes", func() {
		create(shPod(ns, "talk", `echo first; echo second; while [ ! -f /tmp/stop ]; do sleep 0.2; done; exit 1`))
		Eventually(func(g Gomega) { g.Expect(getPod(g, ns, "talk").Status.Phase).To(Equal(corev1.PodRunning)) }, 30*time.Second).Should(Succeed())
		Eventually(func() string { out, _ := kubectl("-n", ns, "logs", "talk"); return out }, 10*time.Second).Should(Equal("first\nsecond\n"))
		out, code := kubectl("-n", ns, "logs", "talk", "--tail=1")
		Expect(code).To(BeZero())
		Expect(out).To(Equal("second\n"))
		out, _ = kubectl("-n", ns, "logs", "talk", "--timestamps")
		Expect(strings.Split(strings.TrimSpace(out), "\n")[0]).To(MatchRegexp(`^\d{4}-\d\d-\d\dT\S+ first$`))

		out, code = kubectl("-n", ns, "exec", "talk", "--", "sh", "-c", "echo hello from exec; exit 3")
		Expect(out).To(ContainSubstring("hello from exec"))
		Expect(code).To(Equal(3))

		By("killing the container: --previous shows the first attempt's log")
		_, code = kubectl("-n", ns, "exec", "talk", "--", "touch", "/tmp/stop")
		Expect(code).To(BeZero())
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, "talk").Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">=", 1))
		}, 30*time.Second).Should(Succeed())
		Eventually(func() string { out, _ := kubectl("-n", ns, "logs", "talk", "--previous"); return out }, 10*time.Second).Should(Equal("first\nsecond\n"))
	})

	It("serves /stats/summary to a client certificate the API server's CA signed", func() {
		// The bed's API server refuses to proxy nodes/proxy to a loopback address, so ask the node directly
		// with the admin's client certificate (authenticated by x509, authorized by SubjectAccessReview).
		cert, err := tls.LoadX509KeyPair(filepath.Join(bedDir, "pki", "admin.crt"), filepath.Join(bedDir, "pki", "admin.key"))
		Expect(err).NotTo(HaveOccurred())
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}}} //nolint:gosec // test
		resp, err := c.Get("https://127.0.0.1:10250/stats/summary")
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
		Expect(string(body)).To(ContainSubstring(`"nodeName":"` + nodeName + `"`))
		Expect(string(body)).To(ContainSubstring(`"workingSetBytes"`))
	})

	It("refuses requests without credentials (401) and with a token lacking RBAC (403)", func() {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test
		resp, err := c.Get("https://127.0.0.1:10250/pods")
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))

		cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
		Expect(err).NotTo(HaveOccurred())
		cs := kubernetes.NewForConfigOrDie(cfg)
		tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), "default",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, path := range []string{"/pods", "/stats/summary", "/metrics", "/containerLogs/x/y/z", "/exec/x/y/z?command=ls"} {
			req, _ := http.NewRequest(http.MethodGet, "https://127.0.0.1:10250"+path, nil)
			req.Header.Set("Authorization", "Bearer "+tok.Status.Token)
			resp, err := c.Do(req)
			Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusForbidden), path)
		}
	})

	It("serves metrics only through the authorized node API: no loopback listener by default", func() {
		// Every hostNetwork pod shares the node's loopback; a plain listener there would hand them what
		// port 10250 guards.
		conn, err := net.DialTimeout("tcp", "127.0.0.1:10247", 2*time.Second)
		if err == nil {
			_ = conn.Close()
		}
		Expect(err).To(HaveOccurred(), "something listens on 127.0.0.1:10247")
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test
		resp, err := c.Get("https://127.0.0.1:10250/metrics")
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
		code, body := nodeGet("/metrics")
		Expect(code).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring("kubelet_running_pods "), "the authorized /metrics serves them")
		for _, family := range []string{"rest_client_requests_total", "rest_client_request_duration_seconds"} {
			Expect(body).To(ContainSubstring("# TYPE "+family+" "), "the API client's %s, as the kubelet's", family)
		}
		for _, loop := range []string{"pleg-relist", "housekeeping", "eviction"} {
			Expect(body).To(ContainSubstring(`nodelet_loop_cpu_seconds_total{loop="`+loop+`"}`), "what the %s loop costs", loop)
		}
	})

	It("serves /metrics/cadvisor: cAdvisor's families for the pods' cgroups, labelled with their pods and containers", func() {
		ns := newNamespace()
		p := create(shPod(ns, "measured", "sleep 3600", withResources(cpuMem("100m", "100Mi"), cpuMem("200m", "200Mi"))))
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, "measured").Status.Phase).To(Equal(corev1.PodRunning))
		}, 60*time.Second).Should(Succeed())
		podCgroup := qosCgroup("burstable").Child(podrules.PodCgroupChild(string(p.UID))).Path(cgroupDriver())
		podLabels := `{container="",id="` + podCgroup + `",image="",name="",namespace="` + ns + `",pod="measured"}`
		Eventually(func(g Gomega) {
			code, body := nodeGet("/metrics/cadvisor")
			g.Expect(code).To(Equal(http.StatusOK), body)
			g.Expect(body).To(ContainSubstring("container_spec_memory_limit_bytes"+podLabels+" 2.097152e+08\n"), "the pod cgroup's memory limit")
			g.Expect(body).To(ContainSubstring("container_spec_cpu_quota"+podLabels+" 20000\n"), "the pod cgroup's CFS quota")
			g.Expect(body).To(MatchRegexp(`container_memory_working_set_bytes\{container="main",id="`+podCgroup+`/[^"]+",image="busybox",name="[0-9a-f]{64}",namespace="`+ns+`",pod="measured"\} [1-9]`),
				"the container's working set under its labels")
			g.Expect(body).To(MatchRegexp(`container_cpu_usage_seconds_total\{container="",cpu="total",id="/",image="",name="",namespace="",pod=""\} [1-9]`), "the root cgroup")
			g.Expect(body).To(MatchRegexp(`machine_cpu_cores\{[^}]*\} [1-9]`))
		}, 30*time.Second, time.Second).Should(Succeed())
	})
})
