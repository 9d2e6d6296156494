package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// hardeningDropIn is a --config-dir drop-in that turns on the kubelet's hardening settings.
const hardeningDropIn = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
enableDebuggingHandlers: false
tlsMinVersion: VersionTLS13
seccompDefault: true
podPidsLimit: 321
`

// execIn runs cmd in the pod's running container through the CRI (the node API may be off) and returns
// its standard output.
func execIn(p *corev1.Pod, cmd ...string) string {
	var out string
	Eventually(func(g Gomega) {
		var id string
		for _, c := range runtimeContainers(p.UID) {
			if c.GetState().String() == "CONTAINER_RUNNING" {
				id = c.Id
			}
		}
		g.Expect(id).NotTo(BeEmpty(), "no running container")
		resp, err := cri.ExecSync(context.Background(), id, cmd, 10*time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.ExitCode).To(BeZero(), string(resp.Stderr))
		out = string(resp.Stdout)
	}, 60*time.Second).Should(Succeed())
	return out
}

var _ = Describe("Hardening settings of the KubeletConfiguration, on the real node", Ordered, func() {
	BeforeAll(func() {
		dir := filepath.Join(bedDir, "hardening.conf.d")
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "10-hardening.conf"), []byte(hardeningDropIn), 0o644)).To(Succeed())
		restartNodelet("NODELET_EXTRA_ARGS=--config-dir " + dir)
		DeferCleanup(func() { restartNodelet() })
	})

	It("refuses TLS below tlsMinVersion on the node API and accepts TLS 1.3", func() {
		_, err := tls.Dial("tcp", "127.0.0.1:10250", &tls.Config{MaxVersion: tls.VersionTLS12, InsecureSkipVerify: true}) //nolint:gosec // test
		Expect(err).To(HaveOccurred(), "a TLS 1.2 handshake must fail with tlsMinVersion VersionTLS13")
		conn, err := tls.Dial("tcp", "127.0.0.1:10250", &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}) //nolint:gosec // test
		Expect(err).NotTo(HaveOccurred())
		Expect(conn.ConnectionState().Version).To(BeEquivalentTo(tls.VersionTLS13))
		_ = conn.Close()
	})

	It("refuses logs and exec with enableDebuggingHandlers false, as the kubelet (405), and still serves /pods", func() {
		ns := newNamespace()
		p := create(shPod(ns, "quiet", "echo hello; sleep 3600"))
		Eventually(func(g Gomega) { g.Expect(getPod(g, ns, "quiet").Status.Phase).To(Equal(corev1.PodRunning)) }, 60*time.Second).Should(Succeed())
		code, body := nodeGet(fmt.Sprintf("/containerLogs/%s/%s/main", ns, p.Name))
		Expect(code).To(Equal(405))
		Expect(body).To(ContainSubstring("Debug endpoints are disabled."))
		code, _ = nodeGet(fmt.Sprintf("/exec/%s/%s/main?command=true&output=1", ns, p.Name))
		Expect(code).To(Equal(405))
		code, _ = nodeGet("/pods")
		Expect(code).To(Equal(200))
	})

	It("runs containers without a profile under RuntimeDefault seccomp with seccompDefault", func() {
		ns := newNamespace()
		p := create(shPod(ns, "filtered", "sleep 3600"))
		Expect(execIn(p, "grep", "^Seccomp:", "/proc/1/status")).To(MatchRegexp(`Seccomp:\s+2`))
		q := create(shPod(ns, "unconfined", "sleep 3600", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}))
		Expect(execIn(q, "grep", "^Seccomp:", "/proc/1/status")).To(MatchRegexp(`Seccomp:\s+0`))
	})

	It("limits the pod's pids cgroup to podPidsLimit", func() {
		ns := newNamespace()
		p := create(shPod(ns, "pids", "sleep 3600"))
		execIn(p, "true") // running
		Eventually(func(g Gomega) {
			g.Expect(readPodCgroup(g, "pids", "besteffort", p, "pids.max")).To(Equal("321"))
		}, 30*time.Second).Should(Succeed())
	})
})

var _ = Describe("Pod security fields on the real node", func() {
	It("refuses to run a root image under runAsNonRoot without runAsUser (CreateContainerConfigError)", func() {
		ns := newNamespace()
		create(shPod(ns, "rootimage", "sleep 3600", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}
		}))
		Eventually(func(g Gomega) {
			p := getPod(g, ns, "rootimage")
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			w := p.Status.ContainerStatuses[0].State.Waiting
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.Reason).To(Equal("CreateContainerConfigError"))
			g.Expect(w.Message).To(Equal("container has runAsNonRoot and image will run as root (pod: \"rootimage_" + ns + "(" + string(p.UID) + ")\", container: main)"))
		}, 60*time.Second).Should(Succeed())
	})
})
