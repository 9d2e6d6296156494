package agent

import (
	"context"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/containergc"
	"github.com/nodelet/nodelet/eviction"
	"github.com/nodelet/nodelet/imagegc"
	"github.com/nodelet/nodelet/podcgroups"
	"github.com/nodelet/nodelet/podlifecycle"
	"github.com/nodelet/nodelet/server"
)

// evictionAdmission is the eviction manager's pod admission, given to the pod workers before the manager
// exists (the manager needs the workers): until a manager is set, and on a simulated node, every pod is
// admitted.
type evictionAdmission struct {
	m atomic.Pointer[eviction.Manager]
}

func (e *evictionAdmission) Admit(pod *corev1.Pod) (bool, string, string) {
	if m := e.m.Load(); m != nil {
		return m.Admit(pod)
	}
	return true, "", ""
}

// evictionManager is the kubelet's eviction manager on a real node: the node API's stats summary gives
// its signals, the pod workers its candidates, and the garbage collectors reclaim disk first. It runs
// with the node and becomes the node's pressure source and an admission handler. Without thresholds the
// kubelet has nothing to do: neither has nodelet.
func (a *Agent) evictionManager(rec record.EventRecorder, srv *server.Server, pods *podlifecycle.Reconciler,
	images *imagegc.Manager, containers *containergc.Collector) error {
	kc := &a.cfg.Kubelet
	thresholds, err := eviction.Thresholds(kc)
	if err != nil {
		return err
	}
	if len(thresholds) == 0 {
		return nil
	}
	opts := eviction.Options{
		NodeName: a.cfg.NodeName, Thresholds: thresholds,
		PressureTransitionPeriod: kc.EvictionPressureTransitionPeriod.Duration,
		MaxPodGracePeriodSeconds: int64(kc.EvictionMaxPodGracePeriod),
	}
	if kc.KernelMemcgNotification {
		if unified, err := podcgroups.IsUnified(podcgroups.DefaultRoot); err == nil && !unified {
			opts.MemoryCgroup = podcgroups.DefaultRoot + "/memory"
		} else {
			a.log.Info("kernelMemcgNotification needs cgroup v1 memory threshold notifications: memory pressure is noticed every 10 s")
		}
	}
	deps := eviction.Deps{Stats: srv, Pods: pods, ContainerGC: containers, Clock: a.clock(), Metrics: a.opts.Metrics}
	if images.Enabled() {
		deps.ImageGC = images
	}
	if rec != nil {
		deps.Recorder = rec
	}
	m, err := eviction.New(opts, deps)
	if err != nil {
		return err
	}
	a.eviction = m
	a.evictionAdmit.m.Store(m)
	a.local = append(a.local, manager.RunnableFunc(func(ctx context.Context) error { return m.Start(ctx) }))
	return nil
}
