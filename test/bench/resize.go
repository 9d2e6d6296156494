package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// resizeLimit bounds one resize's wait for the pod's status to show it applied; resizePoll is how often
	// the status is read meanwhile.
	resizeLimit = 60 * time.Second
	resizePoll  = 10 * time.Millisecond
)

// resizeSize is one of the two sizes the resize series alternates between (limits twice the requests).
type resizeSize struct{ cpu, memory string }

var resizeSizes = [2]resizeSize{{"150m", "96Mi"}, {"100m", "64Mi"}}

func (s resizeSize) requirements() corev1.ResourceRequirements {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s.cpu), corev1.ResourceMemory: resource.MustParse(s.memory)}
	lim := corev1.ResourceList{}
	for name, q := range req {
		q2 := q.DeepCopy()
		q2.Add(q)
		lim[name] = q2
	}
	return corev1.ResourceRequirements{Requests: req, Limits: lim}
}

// resize runs one Burstable pod and resizes its cpu and memory in place through pods/resize, back and
// forth, cfg.resizes times. Each latency runs from the patch to the pod's status showing the new resources
// applied: the container's status.resources equal to them, the generation observed, no resize condition.
func (n *nodeletBench) resize(ctx context.Context, r *report) error {
	if n.cfg.resizes == 0 {
		return nil
	}
	const name = "resize"
	logf("%s: %d in-place resizes of one pod", n.agent, n.cfg.resizes)
	pod := n.pod(name)
	pod.Spec.Containers[0].Resources = resizeSizes[1].requirements()
	cctx, cancel := context.WithTimeout(ctx, apiLimit)
	_, err := n.cs.CoreV1().Pods(n.ns).Create(cctx, pod, metav1.CreateOptions{})
	cancel()
	if err != nil {
		return fmt.Errorf("create pod %s: %w", name, err)
	}
	if _, err := n.tr.waitRunning(ctx, name, runLimit); err != nil {
		return err
	}
	for i := range n.cfg.resizes {
		want := resizeSizes[i%2].requirements()
		patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":%q,"memory":%q},"limits":{"cpu":%q,"memory":%q}}}]}}`,
			want.Requests.Cpu(), want.Requests.Memory(), want.Limits.Cpu(), want.Limits.Memory())
		t0 := time.Now()
		cctx, cancel := context.WithTimeout(ctx, apiLimit)
		_, err := n.cs.CoreV1().Pods(n.ns).Patch(cctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize")
		cancel()
		if err != nil {
			return fmt.Errorf("resize pod %s: %w", name, err)
		}
		if err := n.waitResized(ctx, name, want, t0); err != nil {
			return err
		}
		r.add(r.resizeApplied(), n.agent, time.Since(t0))
	}
	_, err = n.deleteAndWait(ctx, name, time.Time{})
	return err
}

// waitResized polls the pod until its status shows want applied.
func (n *nodeletBench) waitResized(ctx context.Context, name string, want corev1.ResourceRequirements, t0 time.Time) error {
	for time.Since(t0) < resizeLimit {
		cctx, cancel := context.WithTimeout(ctx, apiLimit)
		p, err := n.cs.CoreV1().Pods(n.ns).Get(cctx, name, metav1.GetOptions{})
		cancel()
		if err != nil {
			return fmt.Errorf("get pod %s: %w", name, err)
		}
		if resized(p, want) {
			return nil
		}
		if err := sleepCtx(ctx, resizePoll); err != nil {
			return err
		}
	}
	return fmt.Errorf("pod %s: resize not applied after %s", name, resizeLimit)
}

// resized: the pod's status observed its generation, shows want as its container's resources and has no
// resize condition left.
func resized(p *corev1.Pod, want corev1.ResourceRequirements) bool {
	if p.Status.ObservedGeneration < p.Generation || len(p.Status.ContainerStatuses) != 1 {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
			return false
		}
	}
	got := p.Status.ContainerStatuses[0].Resources
	if got == nil {
		return false
	}
	for _, l := range [][2]corev1.ResourceList{{got.Requests, want.Requests}, {got.Limits, want.Limits}} {
		for name, q := range l[1] {
			if v, ok := l[0][name]; !ok || v.Cmp(q) != 0 {
				return false
			}
		}
	}
	return true
}
