package agent

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/containergc"
	"github.com/nodelet/nodelet/imagegc"
	"github.com/nodelet/nodelet/podlifecycle"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/staticpods"
)

// setupHost wires what only a real node runs (a simulated one has none of them): the node API server and
// the image and container garbage collectors.
func (h host) setupHost(a *Agent, restCfg *rest.Config, store *staticpods.Store, rec record.EventRecorder, connector *runtime.Connector,
	pods *podlifecycle.Reconciler) error {
	srv, err := h.nodeServer(a, restCfg, store)
	if err != nil {
		return err
	}
	gc, err := h.imageGC(a, rec, connector)
	if err != nil {
		return err
	}
	cgc, err := h.containerGC(a, rec, connector, pods)
	if err != nil {
		return err
	}
	a.containerDeletor.Store(cgc)
	a.local = append(a.local, srv, gc, cgc)
	return h.evictionManager(a, rec, srv, pods, gc, cgc)
}

// imageGC is the kubelet's image garbage collector, as imageGCHighThresholdPercent,
// imageGCLowThresholdPercent, imageMinimumGCAge and imageMaximumGCAge say (validated by config). Its
// first pass waits for the runtime to answer.
func (host) imageGC(a *Agent, rec record.EventRecorder, connector *runtime.Connector) (*imagegc.Manager, error) {
	kc := &a.cfg.Kubelet
	return imagegc.New(imagegc.Options{
		Runtime: a.cri, Clock: a.clock(), Recorder: rec, NodeName: a.cfg.NodeName, Metrics: a.opts.Metrics,
		Ready: connector.Connected(),
		Policy: imagegc.Policy{
			HighThresholdPercent: int(derefInt32(kc.ImageGCHighThresholdPercent, 85)),
			LowThresholdPercent:  int(derefInt32(kc.ImageGCLowThresholdPercent, 80)),
			MinAge:               kc.ImageMinimumGCAge.Duration,
			MaxAge:               kc.ImageMaximumGCAge.Duration,
		},
	})
}

// containerGC is the kubelet's container garbage collector, as --minimum-container-ttl-duration,
// --maximum-dead-containers-per-container and --maximum-dead-containers say, with the pod workers telling
// which pods are gone. Its first pass waits for the runtime to answer.
func (host) containerGC(a *Agent, rec record.EventRecorder, connector *runtime.Connector, pods *podlifecycle.Reconciler) (*containergc.Collector, error) {
	cfg := a.cfg
	return containergc.New(containergc.Options{
		Runtime: a.cri, Pods: pods, Clock: a.clock(), Recorder: rec, NodeName: cfg.NodeName,
		PodLogsDir: cfg.Kubelet.PodLogsDir, LegacyLogsDir: containergc.LegacyContainerLogsDir,
		Ready: connector.Connected(),
		Policy: containergc.Policy{
			MinAge:             cfg.MinimumGCAge,
			MaxPerPodContainer: int(cfg.MaxPerPodContainerCount),
			MaxContainers:      int(cfg.MaxContainerCount),
		},
	})
}
