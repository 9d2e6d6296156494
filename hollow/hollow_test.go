package hollow

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nodelet/nodelet/simnode"
	"github.com/nodelet/nodelet/testnode"
)

func TestParseFlags(t *testing.T) {
	o, err := ParseFlags([]string{"--kubeconfig", "k", "--nodes", "3", "--name-prefix", "h-"})
	if err != nil || o.Nodes != 3 || o.NamePrefix != "h-" || o.Kubeconfig != "k" || o.Workers != 4 {
		t.Errorf("ParseFlags = %+v, %v", o, err)
	}
	for _, args := range [][]string{{"--nodes", "2"}, {"--kubeconfig", "k", "--nodes", "0"}, {"--kubeconfig", "k", "--name-prefix", ""}} {
		if _, err := ParseFlags(args); err == nil {
			t.Errorf("ParseFlags(%v) = nil error", args)
		}
	}
	if got := nodeIP(0).String(); got != "10.64.0.1" {
		t.Errorf("nodeIP(0) = %s", got)
	}
	if got := nodeIP(300).String(); got != "10.64.1.45" {
		t.Errorf("nodeIP(300) = %s", got)
	}
}

// TestHollowNodes runs five hollow nodes in this process against envtest: each registers Ready and runs
// only its own pods.
func TestHollowNodes(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS must point at etcd and kube-apiserver (run with `make unit`)")
	}
	ctx, cs := runHollow(t, &envtest.Environment{}, Options{Nodes: 5, NamePrefix: "hollow-"})
	poll := func(what string, ok func(ctx context.Context) bool) {
		t.Helper()
		if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) { return ok(ctx), nil }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	poll("5 Ready nodes", func(ctx context.Context) bool {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		ready := 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return err == nil && ready == 5
	})
	for i := range 5 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)}, Spec: corev1.PodSpec{
			NodeName: fmt.Sprintf("hollow-%d", i), Containers: []corev1.Container{{Name: "app", Image: "registry.example/app"}}}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll("5 Running pods", func(ctx context.Context) bool {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.HostIP != "" {
				running++
			}
		}
		return err == nil && running == 5
	})
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if want := nodeIP(int(p.Name[1] - '0')).String(); p.Status.HostIP != want {
			t.Errorf("pod %s on %s reports hostIP %s, want its own node's %s", p.Name, p.Spec.NodeName, p.Status.HostIP, want)
		}
	}
}

// With --node-api-client-ca, hollow nodes serve their node API: kubectl logs of a hollow pod reads what its
// logs annotation scripted, through the API server.
func TestHollowNodesServeTheNodeAPI(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS must point at etcd and kube-apiserver (run with `make unit`)")
	}
	env := &envtest.Environment{}
	kubelets, err := testnode.ServeNodeAPIs(env, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cs := runHollow(t, env, Options{Nodes: 2, NamePrefix: "api-", NodeAPIClientCA: kubelets.NodeAPI.ClientCAFile})
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "logger", Annotations: map[string]string{
		simnode.AnnotationPrefix + "app.logs": "from a hollow node"}},
		Spec: corev1.PodSpec{NodeName: "api-1", Containers: []corev1.Container{{Name: "app", Image: "registry.example/app"}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var logs []byte
	var lastErr error
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		logs, lastErr = cs.CoreV1().Pods("default").GetLogs("logger", &corev1.PodLogOptions{}).DoRaw(ctx)
		return lastErr == nil, nil
	}); err != nil || string(logs) != "from a hollow node\n" {
		t.Fatalf("logs of the hollow pod = %q, %v (last error: %v)", logs, err, lastErr)
	}
}

// runHollow starts env and runs hollow nodes of opts against it until the test ends; the context ends after a
// minute.
func runHollow(t *testing.T, env *envtest.Environment, opts Options) (context.Context, *kubernetes.Clientset) {
	t.Helper()
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	opts.RestConfig = cfg
	go func() { done <- Run(runCtx, opts) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		cancel()
	})
	return ctx, kubernetes.NewForConfigOrDie(cfg)
}
