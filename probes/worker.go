package probes

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/periodic"
)

// Defaults the API server applies to a probe; repeated here for pods that were not defaulted.
const (
	defaultPeriodSeconds    = 10
	defaultTimeoutSeconds   = 1
	defaultFailureThreshold = 3
	defaultSuccessThreshold = 1
)

// worker probes one container attempt with one probe until it is stopped. Its goroutine owns the
// threshold state; the manager owns the results.
type worker struct {
	m           *Manager
	pod         types.NamespacedName
	podUID      types.UID
	kind        probeType
	containerID string
	container   *corev1.Container
	spec        *corev1.Probe
	ref         *corev1.ObjectReference
	startedAt   time.Time
	labels      ProbeLabels // in the prober metrics

	cancel  context.CancelFunc
	trigger chan struct{} // a buffered request to probe now
	done    chan struct{} // closed when run returns

	last   result // the last probe's result
	streak int    // how many probes in a row returned last
	onHold bool   // no more probing for this attempt (liveness failed, startup decided)
}

// newWorker prepares a worker for the container attempt; the caller starts run.
func newWorker(m *Manager, pod *corev1.Pod, spec *corev1.Container, c ContainerInfo, kind probeType) *worker {
	container := spec.DeepCopy()
	started := c.StartedAt
	if started.IsZero() {
		started = m.clock().Now()
	}
	return &worker{
		m:           m,
		pod:         types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
		podUID:      pod.UID,
		kind:        kind,
		containerID: c.ID,
		container:   container,
		spec:        kind.of(container),
		ref:         containerRef(pod, container.Name),
		startedAt:   started,
		labels:      ProbeLabels{Type: kind.String(), Container: container.Name, Pod: pod.Name, Namespace: pod.Namespace, PodUID: pod.UID},
		trigger:     make(chan struct{}, 1),
		done:        make(chan struct{}),
	}
}

// run waits out the initial delay, then probes at once and every period until ctx ends.
func (w *worker) run(ctx context.Context) {
	defer close(w.done)
	if !w.waitInitialDelay(ctx) {
		return
	}
	_ = periodic.RunTriggered(ctx, w.m.clock(), seconds(w.spec.PeriodSeconds, defaultPeriodSeconds), w.trigger, periodic.Measured(ctx, "probe", w.doProbe))
}

// waitInitialDelay waits until initialDelaySeconds after the container started; false if ctx ended.
func (w *worker) waitInitialDelay(ctx context.Context) bool {
	delay := w.startedAt.Add(time.Duration(w.spec.InitialDelaySeconds) * time.Second).Sub(w.m.clock().Now())
	if delay <= 0 {
		return true
	}
	select {
	case <-ctx.Done():
		return false
	case <-w.m.clock().After(delay):
		return true
	}
}

// poke asks the worker to probe now, without blocking.
func (w *worker) poke() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

// doProbe probes once, unless on hold or held back by the startup probe, and applies the thresholds.
func (w *worker) doProbe(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			logf.FromContext(ctx).Error(nil, "Probe panicked", "panic", r)
		}
	}()
	if w.onHold || (w.kind != startup && !w.m.isStarted(w)) {
		return
	}
	start := w.m.clock().Now()
	out := w.m.probeWithRetries(ctx, w)
	if ctx.Err() != nil {
		return // stopped: the attempt is gone
	}
	w.record(ctx, out)
	if out.verdict == verdictUnknown {
		return // an error, not a result: thrown away (and not counted) as the kubelet does
	}
	w.m.observe(w, metricResult(out), w.m.clock().Since(start))
	r := out.result()
	if !w.crossed(r) {
		return
	}
	w.m.setResult(w, r)
	if w.kind == startup || (w.kind == liveness && r == resultFailure) {
		// Decided for this attempt: a failed liveness probe waits for the next container, a startup probe
		// is done once it succeeded or failed.
		w.onHold = true
		w.streak = 0
	}
}

// crossed counts r and reports whether the run of equal results reached its threshold.
func (w *worker) crossed(r result) bool {
	if r == w.last {
		w.streak++
	} else {
		w.last, w.streak = r, 1
	}
	if r == resultFailure {
		return w.streak >= int(orDefault(w.spec.FailureThreshold, defaultFailureThreshold))
	}
	return w.streak >= int(orDefault(w.spec.SuccessThreshold, defaultSuccessThreshold))
}

// seconds turns a probe's seconds field into a duration, with a default for unset values.
func seconds(v, def int32) time.Duration {
	return time.Duration(orDefault(v, def)) * time.Second
}

// orDefault returns def when v is not positive.
func orDefault(v, def int32) int32 {
	if v <= 0 {
		return def
	}
	return v
}
