package eviction

import (
	"context"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/podrules"
)

// synchronize is one pass of the kubelet's eviction manager: observe, decide which thresholds are met
// (grace periods, minimum reclaim, transition period), publish the node conditions; then, with
// localStorageCapacityIsolation, evict every pod over a local storage limit; if none was, and a threshold
// acts, reclaim node-level resources or evict one pod. It returns the evicted pods.
func (m *Manager) synchronize(ctx context.Context) ([]*corev1.Pod, error) {
	log := logr.FromContextOrDiscard(ctx)
	if len(m.opts.Thresholds) == 0 && !m.opts.LocalStorageCapacityIsolation {
		return nil, nil
	}
	pods := m.deps.Pods.ActivePods()
	sum, err := m.deps.Stats.NodeSummary(ctx)
	if err != nil {
		log.Error(err, "Eviction manager: failed to get summary stats")
		return nil, nil
	}
	now := m.deps.Clock.Now()
	m.updateNotifier(ctx, sum.Node.Memory, now)
	obs, _ := observe(sum)
	acting := m.updateThresholds(obs, now)
	checkLocalStorage := m.opts.LocalStorageCapacityIsolation && slices.ContainsFunc(pods, podrules.HasLocalStorageLimit)
	if len(acting) == 0 && !checkLocalStorage {
		log.V(3).Info("Eviction manager: no resources are starved")
		return nil, nil
	}
	// The pods' figures are read only when a pod can be over a local storage limit or must be ranked.
	if sum.Pods, err = m.deps.Stats.PodSummaries(ctx); err != nil {
		log.Error(err, "Eviction manager: failed to get summary stats")
		return nil, nil
	}
	_, stats := observe(sum)

	if checkLocalStorage {
		if evicted := m.localStorageEviction(ctx, pods, stats); len(evicted) > 0 {
			return evicted, nil
		}
	}
	if len(acting) == 0 {
		log.V(3).Info("Eviction manager: no resources are starved")
		return nil, nil
	}
	if p := m.evictForThreshold(ctx, acting, pods, obs, stats, now); p != nil {
		return []*corev1.Pod{p}, nil
	}
	return nil, nil
}

// updateThresholds records which thresholds the observations meet (grace periods, minimum reclaim) and the
// node conditions they report (transition period), and returns those that act on this pass: met for their
// grace period, on figures newer than the last pass's.
func (m *Manager) updateThresholds(obs observations, now time.Time) []Threshold {
	thresholds := met(m.opts.Thresholds, obs, false)
	m.mu.RLock()
	previous := m.thresholdsMet
	firstAt, lastAt, lastObs := m.firstObservedAt, m.lastObservedAt, m.lastObs
	m.mu.RUnlock()
	if len(previous) > 0 {
		thresholds = merge(thresholds, met(previous, obs, true))
	}
	firstAt = firstObserved(thresholds, firstAt, now)
	lastAt = conditionsLastObserved(conditionsOf(thresholds), lastAt, now)
	conditions := conditionsWithin(lastAt, m.opts.PressureTransitionPeriod, now)
	thresholds = graceMet(thresholds, firstAt, now)

	m.mu.Lock()
	defer m.mu.Unlock()
	m.conditions, m.firstObservedAt, m.lastObservedAt, m.thresholdsMet = conditions, firstAt, lastAt, thresholds
	m.lastObs = obs
	return updatedStats(thresholds, obs, lastObs)
}

// evictForThreshold acts on the first acting threshold by eviction priority: node-level reclaim first,
// then the eviction of the first pod of its ranking that can be evicted, which it returns.
func (m *Manager) evictForThreshold(ctx context.Context, acting []Threshold, pods []*corev1.Pod, obs observations, stats podStats, now time.Time) *corev1.Pod {
	log := logr.FromContextOrDiscard(ctx)
	byEvictionPriority(acting)
	t := acting[0]
	res := signalResource[t.Signal]
	log.Info("Eviction manager: attempting to reclaim", "resourceName", res)
	if r := m.deps.Recorder; r != nil {
		r.Eventf(m.nodeRef(), corev1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim %s", res)
	}
	if m.reclaimNodeLevel(ctx, t.Signal) {
		log.Info("Eviction manager: able to reduce resource pressure without evicting pods.", "resourceName", res)
		return nil
	}
	log.Info("Eviction manager: must evict pod(s) to reclaim", "resourceName", res)
	if len(pods) == 0 {
		log.Error(nil, "Eviction manager: eviction thresholds have been met, but no pods are active to evict")
		return nil
	}
	rank := rankFor(t.Signal, m.dedicatedImageFs(ctx))
	if rank == nil {
		log.Error(nil, "Eviction manager: no ranking function for signal", "threshold", t.Signal)
		return nil
	}
	rank(pods, stats)
	log.Info("Eviction manager: pods ranked for eviction", "pods", podNames(pods))
	for _, a := range acting {
		if o := obs[a.Signal]; !o.time.IsZero() {
			m.metrics.statsAge.WithLabelValues(a.Signal).Observe(now.Sub(o.time).Seconds())
		}
	}
	for _, pod := range pods {
		msg, ann := message(res, pod, stats, acting, obs)
		if m.evict(ctx, pod, m.evictionGrace(t, pod), msg, ann, disruptionTarget(pod, msg)) {
			m.metrics.evictions.WithLabelValues(t.Signal).Inc()
			return pod
		}
	}
	log.Info("Eviction manager: unable to evict any pods from the node")
	return nil
}

// disruptionTarget is the condition of a pod evicted for a threshold.
func disruptionTarget(pod *corev1.Pod, msg string) *corev1.PodCondition {
	return &corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonTerminationByKubelet, Message: msg, ObservedGeneration: pod.Generation}
}

// evictionGrace is the grace period of a pod evicted for t: 1 s for a hard threshold, else the smaller of
// evictionMaxPodGracePeriod and the pod's own.
func (m *Manager) evictionGrace(t Threshold, pod *corev1.Pod) int64 {
	if t.Hard {
		return hardEvictionGracePeriod
	}
	grace := m.opts.MaxPodGracePeriodSeconds
	if tg := pod.Spec.TerminationGracePeriodSeconds; tg != nil && *tg < grace {
		grace = *tg
	}
	return grace
}

// evict kills one pod with the eviction's status (and condition, when one is given), unless it is critical.
func (m *Manager) evict(ctx context.Context, pod *corev1.Pod, grace int64, msg string, ann map[string]string, cond *corev1.PodCondition) bool {
	log := logr.FromContextOrDiscard(ctx)
	if podrules.IsCriticalPod(pod) {
		log.Error(nil, "Eviction manager: cannot evict a critical pod", "pod", klogRef(pod))
		return false
	}
	if r := m.deps.Recorder; r != nil {
		r.AnnotatedEventf(pod, ann, corev1.EventTypeWarning, Reason, "%s", msg)
	}
	m.deps.Pods.KillPod(pod, grace, Reason, msg, cond)
	log.Info("Eviction manager: pod is evicted successfully", "pod", klogRef(pod), "gracePeriod", grace, "message", msg)
	return true
}

// reclaimNodeLevel frees disk without evicting pods — dead containers, then unused images — and reports
// whether every threshold is then resolved (minimum reclaim included). Memory and PID signals have
// nothing to reclaim at node level. nodelet's image filesystem is the node's own here, so every disk
// signal reclaims both (the kubelet's rule without a dedicated image filesystem).
func (m *Manager) reclaimNodeLevel(ctx context.Context, signal string) bool {
	log := logr.FromContextOrDiscard(ctx)
	if !reclaimsFor(signal, m.dedicatedImageFs(ctx)) {
		return false
	}
	var funcs []func(context.Context) error
	if m.deps.ContainerGC != nil {
		funcs = append(funcs, m.deps.ContainerGC.DeleteAllUnusedContainers)
	}
	if m.deps.ImageGC != nil {
		funcs = append(funcs, m.deps.ImageGC.DeleteUnusedImages)
	}
	if len(funcs) == 0 {
		return false
	}
	for _, f := range funcs {
		if err := f(ctx); err != nil {
			log.Info("Eviction manager: unexpected error when attempting to reduce resource pressure", "resourceName", signalResource[signal], "err", err.Error())
		}
	}
	sum, err := m.deps.Stats.NodeSummary(ctx)
	if err != nil {
		log.Error(err, "Eviction manager: failed to get summary stats after resource reclaim")
		return false
	}
	obs, _ := observe(sum)
	return len(met(m.opts.Thresholds, obs, true)) == 0
}

// dedicatedImageFs asks once, as the kubelet, whether the runtime's image filesystem is another than nodefs
// (false without a DiskInfo, or while it cannot tell: asked again next time).
func (m *Manager) dedicatedImageFs(ctx context.Context) bool {
	if m.dedicated != nil {
		return *m.dedicated
	}
	if m.deps.DiskInfo == nil {
		return false
	}
	d, err := m.deps.DiskInfo.HasDedicatedImageFs(ctx)
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "Eviction manager: failed to get HasDedicatedImageFs")
		return false
	}
	m.dedicated = &d
	return d
}

func (m *Manager) nodeRef() *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: m.opts.NodeName, UID: types.UID(m.opts.NodeName)}
}

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, klogRef(p))
	}
	return out
}

// hardMemoryThresholds are the memory.available thresholds a notifier watches.
func (m *Manager) memoryThreshold() (Threshold, bool) {
	for _, t := range m.opts.Thresholds {
		if t.Signal == config.SignalMemoryAvailable {
			return t, true
		}
	}
	return Threshold{}, false
}
