package testnode_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nodelet/nodelet/testnode"
)

// A test node serves its node API to the envtest API server as a real node does: kubectl logs reads what the
// logs annotation wrote, kubectl exec runs what the exec annotation answers, and the node's stats and resource
// metrics carry the usage annotation's figures; a client without the API server's certificate is refused.
func TestNodeAPIThroughTheAPIServer(t *testing.T) {
	env := &envtest.Environment{}
	kubelets, err := testnode.ServeNodeAPIs(env, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Skipf("envtest (KUBEBUILDER_ASSETS): %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	n, err := testnode.Start(ctx, cfg, testnode.Options{Name: "node-api", NodeAPI: kubelets.NodeAPI})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop() })
	cs := kubernetes.NewForConfigOrDie(cfg)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{
			testnode.AnnotationPrefix + "app.logs":  "hello\nworld",
			testnode.AnnotationPrefix + "app.exec":  `{"cat /etc/hostname": "web\n"}`,
			testnode.AnnotationPrefix + "app.usage": "cpu=250m,memory=64Mi",
		}},
		Spec: corev1.PodSpec{NodeName: "node-api", Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		t.Fatalf("pod not Running: %v", err)
	}

	logs, err := cs.CoreV1().Pods("default").GetLogs("web", &corev1.PodLogOptions{Container: "app"}).DoRaw(ctx)
	if err != nil || string(logs) != "hello\nworld\n" {
		t.Errorf("kubectl logs = %q, %v; want the logs annotation's lines", logs, err)
	}

	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("web").SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "app", Command: []string{"cat", "/etc/hostname"}, Stdout: true, Stderr: true},
			scheme.ParameterCodec)
	x, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, req.URL())
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := x.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut}); err != nil || out.String() != "web\n" {
		t.Errorf("kubectl exec = %q %q, %v; want web", out.String(), errOut.String(), err)
	}

	node, err := cs.CoreV1().Nodes().Get(ctx, "node-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("https://127.0.0.1:%d", node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	get := func(cert *tls.Certificate, path string) (int, string) {
		tc := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the node's self-signed serving certificate
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(nil, "/stats/summary"); code != http.StatusUnauthorized {
		t.Errorf("/stats/summary without a client certificate = %d, want 401", code)
	}
	code, body := get(&kubelets.ClientCertificate, "/metrics/resource")
	want := `container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 6.7108864e+07`
	if code != http.StatusOK || !strings.Contains(body, want) {
		t.Errorf("/metrics/resource = %d, want %s in\n%s", code, want, body)
	}
	if code, body := get(&kubelets.ClientCertificate, "/stats/summary"); code != http.StatusOK || !strings.Contains(body, `"usageNanoCores":250000000`) {
		t.Errorf("/stats/summary = %d, want the pod's 250m CPU in\n%s", code, body)
	}
}
