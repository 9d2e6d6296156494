package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// podState is what the watch saw of one pod: when it first ran and when its object went away. Each
// channel is closed once, when its event is first seen.
type podState struct {
	running, dead, gone chan struct{}
	runningAt, goneAt   time.Time
	last                string // the last status seen, for error messages
}

// tracker timestamps, on receipt, the watch events of the pods of one namespace.
type tracker struct {
	mu   sync.Mutex
	pods map[string]*podState
}

// startTracker runs an informer on the namespace's pods and waits (bounded by ctx) for its first list.
// The returned function stops it.
func startTracker(ctx context.Context, cs kubernetes.Interface, ns string) (*tracker, func(), error) {
	t := &tracker{pods: map[string]*podState{}}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.onPod(obj, time.Now()) },
		UpdateFunc: func(_, obj any) { t.onPod(obj, time.Now()) },
		DeleteFunc: func(obj any) { t.onDelete(obj, time.Now()) },
	}); err != nil {
		return nil, nil, err
	}
	stopCh := make(chan struct{})
	stop := func() {
		close(stopCh)
		factory.Shutdown()
	}
	factory.Start(stopCh)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		stop()
		return nil, nil, fmt.Errorf("the pod informer of namespace %s did not sync within 30s", ns)
	}
	return t, stop, nil
}

// state returns the pod's entry, creating it; t.mu must be held.
func (t *tracker) state(name string) *podState {
	s, ok := t.pods[name]
	if !ok {
		s = &podState{running: make(chan struct{}), dead: make(chan struct{}), gone: make(chan struct{}),
			last: "never seen"}
		t.pods[name] = s
	}
	return s
}

func (t *tracker) onPod(obj any, at time.Time) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(pod.Name)
	s.last = describePod(pod)
	if s.runningAt.IsZero() && podRunning(pod) {
		s.runningAt = at
		close(s.running)
	}
	if (pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded) && !isClosed(s.dead) {
		close(s.dead)
	}
}

func (t *tracker) onDelete(obj any, at time.Time) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(pod.Name)
	s.last = "deleted; before: " + describePod(pod)
	if s.goneAt.IsZero() {
		s.goneAt = at
		close(s.gone)
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// waitRunning waits until the pod was seen running and returns when; it fails early when the pod ends.
func (t *tracker) waitRunning(ctx context.Context, name string, limit time.Duration) (time.Time, error) {
	t.mu.Lock()
	s := t.state(name)
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	select {
	case <-s.running:
		return s.runningAt, nil // written before the close, never after
	case <-s.dead:
		return time.Time{}, fmt.Errorf("pod %s ended instead of running (%s)", name, t.last(name))
	case <-s.gone:
		return time.Time{}, fmt.Errorf("pod %s was deleted before it ran (%s)", name, t.last(name))
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("pod %s not Running within %s (%s): %w", name, limit.Round(time.Second), t.last(name), ctx.Err())
	}
}

// waitGone waits until the pod's DELETED event and returns when it came.
func (t *tracker) waitGone(ctx context.Context, name string, limit time.Duration) (time.Time, error) {
	t.mu.Lock()
	s := t.state(name)
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	select {
	case <-s.gone:
		return s.goneAt, nil // written before the close, never after
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("pod %s not gone within %s of its delete (%s): %w", name, limit.Round(time.Second), t.last(name), ctx.Err())
	}
}

func (t *tracker) last(name string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return "last seen: " + t.state(name).last
}

// podRunning: phase Running and every container running.
func podRunning(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) {
		return false
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return true
}

// describePod summarizes a pod's status: phase, deletion, each container's state.
func describePod(pod *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%q", pod.Status.Phase)
	if pod.DeletionTimestamp != nil {
		b.WriteString(" terminating")
	}
	if pod.Status.Reason != "" {
		fmt.Fprintf(&b, " reason=%s", pod.Status.Reason)
	}
	for _, c := range pod.Status.ContainerStatuses {
		switch st := c.State; {
		case st.Running != nil:
			fmt.Fprintf(&b, " %s=running", c.Name)
		case st.Waiting != nil:
			fmt.Fprintf(&b, " %s=waiting(%s: %s)", c.Name, st.Waiting.Reason, st.Waiting.Message)
		case st.Terminated != nil:
			fmt.Fprintf(&b, " %s=terminated(%s, exit %d)", c.Name, st.Terminated.Reason, st.Terminated.ExitCode)
		default:
			fmt.Fprintf(&b, " %s=unknown", c.Name)
		}
	}
	if len(pod.Status.ContainerStatuses) == 0 {
		b.WriteString(" no container statuses")
	}
	return b.String()
}
