package operator

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nodelet/nodelet/testnode"
)

// TestWorkloadsOnTestNodes runs a Deployment's pods, a Job's pod (whose logs it reads through the API server)
// and a crash-looping pod on two test nodes of an envtest API server, then deletes them.
func TestWorkloadsOnTestNodes(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS must point at etcd and kube-apiserver (run with `make unit`)")
	}
	env := &envtest.Environment{}
	// The nodes serve their node API to the API server (kubectl logs and exec work), as real nodes do.
	kubelets, err := testnode.ServeNodeAPIs(env, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(cfg)

	var nodes []*testnode.Node
	for _, name := range []string{"node-a", "node-b"} {
		n, err := testnode.Start(ctx, cfg, testnode.Options{Name: name, NodeAPI: kubelets.NodeAPI})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
		t.Cleanup(func() { _ = n.Stop() })
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "operator"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := cs.CoreV1().Pods("operator")
	create := func(p *corev1.Pod) {
		t.Helper()
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A Deployment's two replicas, one per node, with a readiness probe.
	for i, n := range nodes {
		p := pod(fmt.Sprintf("web-%d", i), n.Name(), corev1.RestartPolicyAlways, nil)
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1}
		create(p)
	}
	// A Job's pod that completes after 2 s, a pod held unready, and a crash-looping pod.
	create(pod("job", "node-a", corev1.RestartPolicyNever, map[string]string{"testnode.nodelet.io/app": "exit=0,after=2s",
		"testnode.nodelet.io/app.logs": "processed 3 items"}))
	create(pod("unready", "node-b", corev1.RestartPolicyAlways, map[string]string{"testnode.nodelet.io/app.ready": "false"}))
	create(pod("crash", "node-b", corev1.RestartPolicyAlways, map[string]string{"testnode.nodelet.io/app": "exit=1,after=1s"}))

	waitPod(ctx, t, pods, "web-0", ready(true))
	waitPod(ctx, t, pods, "web-1", ready(true))
	waitPod(ctx, t, pods, "job", phase(corev1.PodSucceeded))
	if logs, err := pods.GetLogs("job", &corev1.PodLogOptions{}).DoRaw(ctx); err != nil || string(logs) != "processed 3 items\n" {
		t.Errorf("the Job pod's logs = %q, %v; want what its logs annotation scripted", logs, err)
	}
	waitPod(ctx, t, pods, "crash", waiting("CrashLoopBackOff"))
	waitPod(ctx, t, pods, "unready", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && !isReady(p) })

	for _, name := range []string{"web-0", "web-1", "job", "unready", "crash"} {
		if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"web-0", "web-1", "job", "unready", "crash"} {
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := pods.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("pod %s not deleted by its node: %v", name, err)
		}
	}
	// Stopping a node removes nothing from the API server.
	if err := nodes[0].Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err != nil {
		t.Fatalf("node-a after Stop: %v", err)
	}
}

func pod(name, node string, restart corev1.RestartPolicy, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName: node, RestartPolicy: restart, TerminationGracePeriodSeconds: ptr.To(int64(30)),
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}},
		},
	}
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func ready(want bool) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return isReady(p) == want }
}

func phase(want corev1.PodPhase) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return p.Status.Phase == want }
}

func waiting(reason string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Waiting != nil && c.State.Waiting.Reason == reason {
				return true
			}
		}
		return false
	}
}

// waitPod waits until the pod satisfies ok, failing the test with its last status otherwise.
func waitPod(ctx context.Context, t *testing.T, pods interface {
	Get(context.Context, string, metav1.GetOptions) (*corev1.Pod, error)
}, name string, ok func(*corev1.Pod) bool) {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not there yet
		}
		last = p
		return ok(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s: %v; last status: %+v", name, err, last.Status)
	}
}
