package nodeshutdown

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/podrules"
)

// processShutdown stops the pods group by group, lowest priority first, each group within its period,
// then releases the inhibitor lock. The start and end are recorded.
func (m *Manager) processShutdown(ctx context.Context) {
	log := m.opts.Log
	log.V(1).Info("Shutdown manager processing shutdown event")
	st := state{StartTime: m.opts.Clock.Now()}
	m.record(st)
	defer func() {
		st.EndTime = m.opts.Clock.Now()
		m.record(st)
		m.release()
		log.V(1).Info("Shutdown manager completed processing shutdown event, node will shutdown shortly")
	}()
	p := m.pods.Load()
	if p == nil {
		return
	}
	for i, pods := range groupPods(m.opts.Groups, (*p).AdmittedPods()) {
		if len(pods) == 0 {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		m.stopGroup(ctx, *p, m.opts.Groups[i], pods)
	}
}

// record keeps the shutdown's times in the state file and the metrics.
func (m *Manager) record(st state) {
	if err := saveState(m.opts.StateDir, st); err != nil {
		m.opts.Log.Error(err, "Failed to store graceful shutdown state")
	}
	m.metrics.set(st)
}

// stopGroup asks each pod of a group to stop within the shorter of the group's period and its own grace
// period, and waits for them all, at most the group's period.
func (m *Manager) stopGroup(ctx context.Context, p Pods, g Group, pods []*corev1.Pod) {
	log := m.opts.Log
	for _, pod := range pods {
		grace := int64(g.Period / time.Second)
		if t := pod.Spec.TerminationGracePeriodSeconds; t != nil && *t <= grace {
			grace = *t
		}
		grace = max(grace, 1)
		log.V(1).Info("Shutdown manager killing pod with gracePeriod", "pod", pod.Namespace+"/"+pod.Name, "gracePeriod", grace)
		p.KillPod(pod, grace, reasonTerminated, messageTerminated, &corev1.PodCondition{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonTerminationByKubelet,
			Message: messageTerminated,
		})
	}
	if g.Period <= 0 {
		return
	}
	deadline := m.opts.Clock.NewTimer(g.Period)
	defer deadline.Stop()
	tick := m.opts.Clock.NewTicker(pollPeriod)
	defer tick.Stop()
	for !stopped(p, pods) {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C():
			log.V(1).Info("Shutdown manager pod killing time out", "gracePeriod", g.Period.Seconds(), "priority", g.Priority)
			return
		case <-tick.C():
		}
	}
	log.V(1).Info("Done waiting for all pods in group to terminate", "gracePeriod", g.Period.Seconds(), "priority", g.Priority)
}

// stopped reports whether nothing of these pods runs any more (their volumes torn down too).
func stopped(p Pods, pods []*corev1.Pod) bool {
	for _, pod := range pods {
		if !p.PodCleanedUp(pod.UID) {
			return false
		}
	}
	return true
}

// groupPods puts each pod in the group of the highest priority at most its own (spec.priority, 0 when
// unset); a pod below every group goes to the lowest.
func groupPods(groups []Group, pods []*corev1.Pod) [][]*corev1.Pod {
	out := make([][]*corev1.Pod, len(groups))
	for _, p := range pods {
		prio := podrules.PodPriority(p)
		i := 0
		for j, g := range groups {
			if g.Priority <= prio {
				i = j
			}
		}
		if len(out) > 0 {
			out[i] = append(out[i], p)
		}
	}
	return out
}
