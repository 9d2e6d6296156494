package agent

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/nodelet/nodelet/userns"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/containergc"
	"github.com/nodelet/nodelet/devices"
	"github.com/nodelet/nodelet/dra"
	"github.com/nodelet/nodelet/imagegc"
	"github.com/nodelet/nodelet/nodeshutdown"
	"github.com/nodelet/nodelet/podlifecycle"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/staticpods"
)

// setupHost wires what only a real node runs (a simulated one has none of them): the node API server and
// the image and container garbage collectors.
func (h host) setupHost(a *Agent, restCfg *rest.Config, store *staticpods.Store, rec record.EventRecorder, connector *runtime.Connector,
	pods *podlifecycle.Reconciler) error {
	srv, err := h.nodeServer(a, restCfg, store, pods)
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
	a.shutdown.UsePods(pods)
	a.local = append(a.local, srv, gc, cgc, h.podResourcesServer(a, pods))
	return h.evictionManager(a, rec, srv, pods, gc, cgc)
}

// deviceManager is the device manager on <root>/device-plugins (the kubelet's /var/lib/kubelet/device-plugins
// when the root directory is the kubelet's): it gives the pods their devices, and the Node its device
// plugin resources (setupAPI).
func (host) deviceManager(a *Agent, deps *podlifecycle.Deps) error {
	m, err := devices.NewManager(devices.Options{Dir: filepath.Join(a.cfg.RootDir, "device-plugins"), Log: a.log.WithName("devices"),
		Clock: a.clock(), OnChange: func() {
			if f := a.nodeTrigger.Load(); f != nil {
				(*f)()
			}
		}, OnHealthChange: func(uids []types.UID) {
			if f := a.podsTrigger.Load(); f != nil {
				(*f)(uids)
			}
		}})
	if err != nil {
		return err
	}
	a.devices, deps.Devices = m, m
	a.local = append(a.local, manager.RunnableFunc(m.Start))
	return nil
}

// dynamicResources is the DRA manager: the pods' ResourceClaims prepared by their drivers' plugins (which
// register in <root>/plugins_registry), recorded in <root>/dra_manager_state, the kubelet's file.
func (host) dynamicResources(a *Agent, deps *podlifecycle.Deps) (*dra.Manager, error) {
	opts := dra.Options{RootDir: a.cfg.RootDir, NodeName: a.cfg.NodeName, Clock: a.clock(), Log: a.log.WithName("dra"),
		OnHealthChange: func(uids []types.UID) {
			if f := a.podsTrigger.Load(); f != nil {
				(*f)(uids)
			}
		}}
	a.api.claimObjects(a, &opts)
	m, err := dra.NewManager(opts)
	if err != nil {
		return nil, err
	}
	if err := m.RegisterMetrics(a.opts.Metrics); err != nil {
		return nil, fmt.Errorf("register DRA metrics: %w", err)
	}
	deps.DynamicResources = m
	a.claims = m
	a.local = append(a.local, manager.RunnableFunc(m.Start))
	return m, nil
}

// userNamespaces gives pods that set hostUsers: false a range of IDs of their own, as the kubelet's user
// namespace manager (userNamespaces.idsPerPod, the "kubelet" user's subordinate IDs), recorded in the pods'
// directories.
func (host) userNamespaces(a *Agent, deps *podlifecycle.Deps) error {
	var idsPerPod int64
	if u := a.cfg.Kubelet.UserNamespaces; u != nil && u.IDsPerPod != nil {
		idsPerPod = *u.IDsPerPod
	}
	m, err := userns.New(userns.Options{RootDir: a.cfg.RootDir, IDsPerPod: idsPerPod, MaxPods: int(a.cfg.Kubelet.MaxPods),
		Runtime: a.cri, Clock: a.clock(), Log: a.log.WithName("userns")})
	if err != nil {
		return err
	}
	deps.UserNamespaces = m
	return nil
}

// shutdownManager is graceful node shutdown, as shutdownGracePeriod, shutdownGracePeriodCriticalPods and
// shutdownGracePeriodByPodPriority say (off without them): an admission handler of the pod workers, a
// readiness condition of the Node (setupAPI), and the pods' stop when logind says the machine goes down.
func (host) shutdownManager(a *Agent, deps *podlifecycle.Deps, rec record.EventRecorder) error {
	m := nodeshutdown.New(nodeshutdown.Options{
		Groups: nodeshutdown.Groups(&a.cfg.Kubelet), Recorder: rec, NodeName: a.cfg.NodeName, Clock: a.clock(),
		Log: a.log.WithName("nodeshutdown"), StateDir: a.cfg.RootDir,
		SyncNode: func() {
			if f := a.nodeTrigger.Load(); f != nil {
				(*f)()
			}
		},
	})
	if err := m.RegisterMetrics(a.opts.Metrics); err != nil {
		return fmt.Errorf("register graceful shutdown metrics: %w", err)
	}
	a.shutdown = m
	deps.Admitters = append(deps.Admitters, m)
	a.local = append(a.local, manager.RunnableFunc(m.Start))
	return nil
}

// podResourcesServer serves the pod resources API on <root>/pod-resources/kubelet.sock.
func (host) podResourcesServer(a *Agent, pods *podlifecycle.Reconciler) manager.Runnable {
	s := &devices.PodResourcesServer{Devices: a.devices, Pods: pods.AdmittedPods, Log: a.log.WithName("pod-resources")}
	if a.claims != nil {
		s.Claims = a.claims
	}
	return manager.RunnableFunc(func(ctx context.Context) error {
		return s.Serve(ctx, filepath.Join(a.cfg.RootDir, "pod-resources", devices.PodResourcesSocket))
	})
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
