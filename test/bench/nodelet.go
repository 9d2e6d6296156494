package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

const (
	// trapScript exits on SIGTERM (a shell as PID 1 ignores SIGTERM without a trap, as busybox sleep does).
	trapScript = `trap "exit 0" TERM; while true; do sleep 0.1; done`
	// apiLimit bounds one API call; nodeReadyLimit and saLimit the waits before the first pod.
	apiLimit       = 30 * time.Second
	nodeReadyLimit = 120 * time.Second
	saLimit        = 60 * time.Second
	// singleSettle and burstSettle separate a pod's start from its delete, so that the shell has set its
	// trap and the agent has finished the start before the delete is timed.
	singleSettle = 500 * time.Millisecond
	burstSettle  = time.Second
)

// nodeletBench creates and deletes pods through the API server, run by one node agent (nodelet or the
// kubelet), and times them through a watch.
type nodeletBench struct {
	agent string
	cfg   config
	cs    kubernetes.Interface
	ns    string
	tr    *tracker
}

// runAgent starts the node agent (nodelet, or the kubelet in its place on the same bed) and measures pod
// start and delete through it; the kubelet is stopped again after its phase.
func runAgent(ctx context.Context, cfg config, r *report, agent string) (err error) {
	logf("%s: starting %s", agent, agent)
	if err := bed(ctx, cfg, agent, 5*time.Minute, "start", "nodelet"); err != nil {
		return err
	}
	if agent != agentNodelet {
		defer func() {
			logf("%s: stopping %s", agent, agent)
			err = errors.Join(err, bed(context.WithoutCancel(ctx), cfg, agent, 90*time.Second, "stop", "nodelet"))
		}()
	}
	cs, err := clientset(cfg.kubeconfig)
	if err != nil {
		return err
	}
	if err := waitNodeReady(ctx, cs, cfg.node); err != nil {
		return err
	}
	ns, err := createNamespace(ctx, cs)
	if err != nil {
		return err
	}
	defer deleteNamespace(context.WithoutCancel(ctx), cs, ns)
	tr, stop, err := startTracker(ctx, cs, ns)
	if err != nil {
		return err
	}
	defer stop()
	n := &nodeletBench{agent: agent, cfg: cfg, cs: cs, ns: ns, tr: tr}
	if err := n.single(ctx, r); err != nil {
		return err
	}
	if err := n.burst(ctx, r); err != nil {
		return err
	}
	if err := n.resize(ctx, r); err != nil {
		return err
	}
	return n.idle(ctx, r)
}

// clientset is a client without client-side throttling: a burst of creates must not queue in it.
func clientset(kubeconfig string) (*kubernetes.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	rc.QPS, rc.Burst = 1000, 2000
	rc.UserAgent = "nodelet-bench"
	return kubernetes.NewForConfig(rc)
}

// waitNodeReady polls the Node until it is Ready and carries no not-ready/unreachable taint.
func waitNodeReady(ctx context.Context, cs kubernetes.Interface, name string) error {
	logf("nodelet: waiting for node %s to be Ready", name)
	ctx, cancel := context.WithTimeout(ctx, nodeReadyLimit)
	defer cancel()
	var last string
	for {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			last = err.Error()
		case !nodeReady(node):
			last = "not Ready"
		case hasTaint(node, "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
			last = "Ready but still tainted not-ready/unreachable"
		default:
			return nil
		}
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return fmt.Errorf("node %s not ready within %s (%s)", name, nodeReadyLimit, last)
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *corev1.Node, keys ...string) bool {
	for _, t := range n.Spec.Taints {
		for _, k := range keys {
			if t.Key == k {
				return true
			}
		}
	}
	return false
}

// createNamespace creates a fresh namespace and waits for its default ServiceAccount (pods are refused
// until it exists).
func createNamespace(ctx context.Context, cs kubernetes.Interface) (string, error) {
	name := "bench-" + utilrand.String(5)
	cctx, cancel := context.WithTimeout(ctx, apiLimit)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(cctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create namespace %s: %w", name, err)
	}
	logf("nodelet: namespace %s, waiting for its default ServiceAccount", name)
	wctx, wcancel := context.WithTimeout(ctx, saLimit)
	defer wcancel()
	for {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(wctx, "default", metav1.GetOptions{})
		if err == nil {
			return name, nil
		}
		if serr := sleepCtx(wctx, 200*time.Millisecond); serr != nil {
			return name, fmt.Errorf("no default ServiceAccount in namespace %s within %s: %w", name, saLimit, err)
		}
	}
}

func deleteNamespace(ctx context.Context, cs kubernetes.Interface, ns string) {
	ctx, cancel := context.WithTimeout(ctx, apiLimit)
	defer cancel()
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		logf("warning: delete namespace %s: %v", ns, err)
	}
}

// pod is a BestEffort busybox pod bound to the node whose shell exits on SIGTERM.
func (n *nodeletBench) pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: n.ns, Labels: map[string]string{"app": "nodelet-bench"}},
		Spec: corev1.PodSpec{
			NodeName:                      n.cfg.node,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(30)),
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           n.cfg.image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sh", "-c", trapScript},
			}},
		},
	}
}

// single starts one pod at a time (create → Running) and deletes it (delete → gone) before the next.
func (n *nodeletBench) single(ctx context.Context, r *report) error {
	logf("%s: %d single pods", n.agent, n.cfg.single)
	for i := range n.cfg.single {
		name := fmt.Sprintf("single-%02d", i)
		d, err := n.createAndWait(ctx, name, time.Time{})
		if err != nil {
			return err
		}
		r.add(r.singleStart(), n.agent, d)
		if err := sleepCtx(ctx, singleSettle); err != nil {
			return err
		}
		if d, err = n.deleteAndWait(ctx, name, time.Time{}); err != nil {
			return err
		}
		r.add(r.singleDelete(), n.agent, d)
	}
	return nil
}

// burst creates all pods at once, then deletes them all at once; latencies run from the common start.
func (n *nodeletBench) burst(ctx context.Context, r *report) error {
	names := make([]string, n.cfg.burst)
	for i := range names {
		names[i] = fmt.Sprintf("burst-%02d", i)
	}
	logf("%s: burst of %d pods", n.agent, len(names))
	lat, err := together(names, func(name string, t0 time.Time) (time.Duration, error) {
		return n.createAndWait(ctx, name, t0)
	})
	r.add(r.burstStart(), n.agent, lat...)
	if err != nil {
		return err
	}
	if err := sleepCtx(ctx, burstSettle); err != nil {
		return err
	}
	logf("%s: deleting the %d burst pods at once", n.agent, len(names))
	lat, err = together(names, func(name string, t0 time.Time) (time.Duration, error) {
		return n.deleteAndWait(ctx, name, t0)
	})
	r.add(r.burstDelete(), n.agent, lat...)
	return err
}

// together runs op for every name at once from a common start and returns the latencies of those that
// succeeded, with the errors of the others.
func together(names []string, op func(name string, t0 time.Time) (time.Duration, error)) ([]time.Duration, error) {
	lat := make([]time.Duration, len(names))
	errs := make([]error, len(names))
	gate := make(chan struct{})
	var t0 time.Time
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			<-gate
			lat[i], errs[i] = op(name, t0)
		})
	}
	t0 = time.Now()
	close(gate) // t0 is written before the gate opens
	wg.Wait()
	var ok []time.Duration
	for i := range names {
		if errs[i] == nil {
			ok = append(ok, lat[i])
		}
	}
	return ok, errors.Join(errs...)
}

// createAndWait creates the pod and returns the time from t0 (zero: just before the create) to the watch
// event that showed it Running.
func (n *nodeletBench) createAndWait(ctx context.Context, name string, t0 time.Time) (time.Duration, error) {
	if t0.IsZero() {
		t0 = time.Now()
	}
	cctx, cancel := context.WithTimeout(ctx, apiLimit)
	_, err := n.cs.CoreV1().Pods(n.ns).Create(cctx, n.pod(name), metav1.CreateOptions{})
	cancel()
	if err != nil {
		return 0, fmt.Errorf("create pod %s: %w", name, err)
	}
	at, err := n.tr.waitRunning(ctx, name, runLimit-time.Since(t0))
	if err != nil {
		return 0, err
	}
	return at.Sub(t0), nil
}

// deleteAndWait deletes the pod (its own grace period) and returns the time from t0 (zero: just before
// the delete) to its DELETED watch event.
func (n *nodeletBench) deleteAndWait(ctx context.Context, name string, t0 time.Time) (time.Duration, error) {
	if t0.IsZero() {
		t0 = time.Now()
	}
	cctx, cancel := context.WithTimeout(ctx, apiLimit)
	err := n.cs.CoreV1().Pods(n.ns).Delete(cctx, name, metav1.DeleteOptions{})
	cancel()
	if err != nil {
		return 0, fmt.Errorf("delete pod %s: %w", name, err)
	}
	at, err := n.tr.waitGone(ctx, name, goneLimit-time.Since(t0))
	if err != nil {
		return 0, err
	}
	return at.Sub(t0), nil
}
