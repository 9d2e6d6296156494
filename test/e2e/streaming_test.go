package e2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// kubectlStream starts a long-running kubectl and returns its merged output as lines, and a stop func.
func kubectlStream(stdin io.Reader, args ...string) (<-chan string, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, os.Getenv("KUBECTL"), args...)
	cmd.Stdin = stdin
	out, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	cmd.Stderr = cmd.Stdout
	Expect(cmd.Start()).To(Succeed())
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines, func() { cancel(); _ = cmd.Wait() }
}

// collect reads lines until one contains want or the time is up.
func collect(lines <-chan string, want string, limit time.Duration) string {
	var b strings.Builder
	deadline := time.After(limit)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return b.String()
			}
			b.WriteString(l + "\n")
			if strings.Contains(l, want) {
				return b.String()
			}
		case <-deadline:
			return b.String()
		}
	}
}

var _ = Describe("Streaming through the API server", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		create(shPod(ns, "stream", `mkdir -p /www; echo served > /www/index.html; httpd -p 8080 -h /www; i=0; while true; do i=$((i+1)); echo "tick $i"; sleep 0.5; done`, func(p *corev1.Pod) {
			p.Spec.Containers[0].Stdin = true
		}))
		Eventually(func(g Gomega) { g.Expect(getPod(g, ns, "stream").Status.Phase).To(Equal(corev1.PodRunning)) }, 30*time.Second).Should(Succeed())
	})

	It("follows logs (kubectl logs -f)", func() {
		lines, stop := kubectlStream(nil, "-n", ns, "logs", "-f", "stream")
		defer stop()
		out := collect(lines, "tick 6", 15*time.Second)
		Expect(out).To(ContainSubstring("tick 6"))
	})

	It("streams stdin to exec (kubectl exec -i)", func() {
		lines, stop := kubectlStream(strings.NewReader("hello through stdin\n"), "-n", ns, "exec", "-i", "stream", "--", "cat")
		defer stop()
		Expect(collect(lines, "hello through stdin", 15*time.Second)).To(ContainSubstring("hello through stdin"))
	})

	It("runs an interactive exec with a terminal (kubectl exec -it) and returns its exit code", func() {
		// script(1) gives kubectl a pseudo-terminal, as a person at a shell would.
		cmd := exec.Command("script", "-qec", os.Getenv("KUBECTL")+" -n "+ns+" exec -it stream -- sh -c 'tty; exit 4'", "/dev/null")
		cmd.Env = os.Environ()
		out, err := cmd.CombinedOutput()
		var exitErr *exec.ExitError
		Expect(errors.As(err, &exitErr)).To(BeTrue(), string(out))
		Expect(exitErr.ExitCode()).To(Equal(4), string(out))
		Expect(string(out)).To(ContainSubstring("/dev/pts/"))
	})

	It("attaches to a running container (kubectl attach)", func() {
		lines, stop := kubectlStream(nil, "-n", ns, "attach", "stream", "-c", "main")
		defer stop()
		Expect(collect(lines, "tick", 15*time.Second)).To(MatchRegexp(`tick \d+`))
	})

	It("forwards a port to busybox httpd (kubectl port-forward)", func() {
		lines, stop := kubectlStream(nil, "-n", ns, "port-forward", "pod/stream", "18080:8080")
		defer stop()
		Expect(collect(lines, "Forwarding from", 15*time.Second)).To(ContainSubstring("Forwarding from"))
		Eventually(func(g Gomega) {
			resp, err := http.Get("http://127.0.0.1:18080/index.html")
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			body, _ := io.ReadAll(resp.Body)
			g.Expect(string(body)).To(Equal("served\n"))
		}, 15*time.Second).Should(Succeed())
	})
})
