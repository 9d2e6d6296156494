package agent

import (
	"context"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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
// with the node and becomes the node's pressure source and an admission handler. Without thresholds and
// without localStorageCapacityIsolation the kubelet has nothing to do: neither has nodelet.
func (host) evictionManager(a *Agent, rec record.EventRecorder, srv *server.Server, pods *podlifecycle.Reconciler,
	images *imagegc.Manager, containers *containergc.Collector) error {
	kc := &a.cfg.Kubelet
	thresholds, err := eviction.Thresholds(kc)
	if err != nil {
		return err
	}
	isolation := kc.LocalStorageCapacityIsolation == nil || *kc.LocalStorageCapacityIsolation
	if len(thresholds) == 0 && !isolation {
		return nil
	}
	opts := eviction.Options{
		NodeName: a.cfg.NodeName, Thresholds: thresholds,
		PressureTransitionPeriod:      kc.EvictionPressureTransitionPeriod.Duration,
		MaxPodGracePeriodSeconds:      int64(kc.EvictionMaxPodGracePeriod),
		LocalStorageCapacityIsolation: isolation,
	}
	if kc.KernelMemcgNotification {
		if unified, err := podcgroups.IsUnified(podcgroups.DefaultRoot); err == nil && !unified {
			opts.MemoryCgroup = podcgroups.DefaultRoot + "/memory"
		} else {
			a.log.Info("kernelMemcgNotification needs cgroup v1 memory threshold notifications: memory pressure is noticed every 10 s")
		}
	}
	deps := eviction.Deps{Stats: srv, Pods: pods, ContainerGC: containers, Clock: a.clock(), Metrics: a.opts.Metrics,
		DiskInfo: diskInfo{rootDir: a.cfg.RootDir, cri: a.cri}}
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

// imageFsInfo is the runtime call the dedicated image filesystem check makes.
type imageFsInfo interface {
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// diskInfo tells whether the runtime's image filesystem is another device than nodefs (the root dir's),
// as the kubelet compares them.
type diskInfo struct {
	rootDir string
	cri     imageFsInfo
}

func (d diskInfo) HasDedicatedImageFs(ctx context.Context) (bool, error) {
	resp, err := d.cri.ImageFsInfo(ctx)
	if err != nil {
		return false, err
	}
	fss := resp.GetImageFilesystems()
	if len(fss) == 0 || fss[0].GetFsId().GetMountpoint() == "" {
		return false, nil
	}
	var node, image unix.Stat_t
	if err := unix.Stat(d.rootDir, &node); err != nil {
		return false, fmt.Errorf("stat %s: %w", d.rootDir, err)
	}
	if err := unix.Stat(fss[0].GetFsId().GetMountpoint(), &image); err != nil {
		return false, fmt.Errorf("stat image filesystem: %w", err)
	}
	return node.Dev != image.Dev, nil
}
