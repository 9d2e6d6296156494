package agent

import (
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/imagepull"
	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/podcgroups"
	"github.com/nodelet/nodelet/podlifecycle"
	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
)

// sysctlAllowlist is the kubelet's sysctl admission: the safe sysctls this kernel namespaces, plus
// allowedUnsafeSysctls. Without a kernel version, only the safe sysctls any kernel has are allowed.
func sysctlAllowlist(ctx context.Context, cfg *config.Config) (*podlifecycle.SysctlAllowlist, error) {
	release, err := machine.Reader{}.KernelRelease()
	if err != nil {
		log.FromContext(ctx).Error(err, "Kernel version unknown, dropping the safe sysctls that need a recent kernel")
	}
	a, err := podlifecycle.NewSysctlAllowlist(release, cfg.Kubelet.AllowedUnsafeSysctls)
	if err != nil {
		return nil, fmt.Errorf("allowedUnsafeSysctls: %w", err)
	}
	return a, nil
}

// hardening wires the pod cgroups (podPidsLimit) and the image pull credential verification into the pod
// controller, each only where it applies (a nil pointer must not become a non-nil interface); on the host
// only (a simulated node makes no cgroups and keeps no records on disk).
func (h host) hardening(a *Agent, deps *podlifecycle.Deps, rec record.EventRecorder, connector *runtime.Connector) error {
	cg, err := podCgroups(a.cfg, a.opts.Metrics, a.hostResources.HugePageSizes)
	if err != nil {
		return err
	}
	if cg != nil && rec != nil {
		// The kubepods cgroup now holds the node's allocatable: the kubelet's event.
		rec.Event(&corev1.ObjectReference{Kind: "Node", Name: a.cfg.NodeName, UID: types.UID(a.cfg.NodeName)},
			corev1.EventTypeNormal, "NodeAllocatableEnforced", "Updated Node Allocatable limit across pods")
	}
	version := prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "cgroup_version", Help: "cgroup version on the hosts."})
	version.Set(1)
	if a.hostResources.CgroupV2 {
		version.Set(2)
	}
	if err := a.opts.Metrics.Register(version); err != nil {
		return fmt.Errorf("register kubelet_cgroup_version: %w", err)
	}
	if cg != nil {
		deps.PodCgroups = cg
		a.podCgroups = cg
	}
	records, err := h.pullRecords(a, connector)
	if err != nil {
		return err
	}
	if records != nil {
		deps.PullRecords = records
	}
	return nil
}

// podCgroups makes pod cgroups with the kubelet's cpu, memory and huge page values and podPidsLimit with
// cgroupsPerQOS (without it the kubelet makes no pod cgroups either), as cgroupfs directories or, with the
// systemd driver, as systemd slices (systemd reached over D-Bus as runc reaches it). Huge page limits are set
// for the host's page sizes (hugePageSizes) where the hugetlb controller is available.
// The kubepods cgroup gets the node's capacity, or its allocatable with enforceNodeAllocatable "pods",
// at once (the kubelet's enforceNodeAllocatableCgroups at start).
func podCgroups(cfg *config.Config, reg prometheus.Registerer, hugePageSizes []int64) (*podcgroups.Manager, error) {
	kc := &cfg.Kubelet
	if kc.CgroupsPerQOS != nil && !*kc.CgroupsPerQOS {
		return nil, nil
	}
	var units podcgroups.Units
	if kc.CgroupDriver == podrules.CgroupDriverSystemd {
		units = &podcgroups.SystemdUnits{}
	}
	m, err := podcgroups.New(podcgroups.DefaultRoot, podrules.KubepodsCgroupName(kc.CgroupRoot).ToCgroupfs(),
		derefInt64(kc.PodPidsLimit, -1), true, kc.CgroupDriver, units)
	if err != nil {
		return nil, fmt.Errorf("pod cgroups: %w", err)
	}
	if podcgroups.HugetlbAvailable(m.Root, m.Unified) {
		m.HugePageSizes = hugePageSizes
	}
	if err := m.RegisterMetrics(reg); err != nil {
		return nil, err
	}
	values, err := kubepodsValues(cfg)
	if err != nil {
		return nil, err
	}
	if err := m.EnsureKubepods(values); err != nil {
		return nil, fmt.Errorf("node allocatable cgroup: %w", err)
	}
	return m, nil
}

// kubepodsValues are the kubepods cgroup's values from the host's capacity (its huge pages included) and the
// reservations.
func kubepodsValues(cfg *config.Config) (podcgroups.Kubepods, error) {
	host := machine.Reader{FsPath: cfg.RootDir}
	info, err := host.Info()
	if err != nil {
		return podcgroups.Kubepods{}, err
	}
	sig, err := host.Signals()
	if err != nil {
		return podcgroups.Kubepods{}, err
	}
	reserved, err := cfg.Reserved()
	if err != nil {
		return podcgroups.Kubepods{}, err
	}
	cpu, mem, pids := reserved[corev1.ResourceCPU], reserved[corev1.ResourceMemory], reserved["pid"]
	k := podcgroups.KubepodsValues(info.NumCPU*1000, info.MemoryBytes, sig.PIDMax,
		slices.Contains(cfg.Kubelet.EnforceNodeAllocatable, "pods"), cpu.MilliValue(), mem.Value(), pids.Value())
	// Huge pages cannot be reserved (systemReserved and kubeReserved take none): pods may use them all.
	k.HugePages = info.HugePages
	return k, nil
}

// pullRecords is the kubelet's image pull credential verification (KubeletEnsureSecretPulledImages, on by
// default): records under <root-dir>/image_manager; the pull intents an earlier run left are turned into
// records once the runtime answers.
func (host) pullRecords(a *Agent, connector *runtime.Connector) (*imagepull.Manager, error) {
	kc := &a.cfg.Kubelet
	if !config.EnsureSecretPulledImages(kc) {
		return nil, nil
	}
	policy, err := imagepull.NewPolicy(kc.ImagePullCredentialsVerificationPolicy, kc.PreloadedImagesVerificationAllowlist)
	if err != nil {
		return nil, fmt.Errorf("imagePullCredentialsVerificationPolicy: %w", err)
	}
	records, err := imagepull.NewFileRecords(a.cfg.RootDir)
	if err != nil {
		return nil, err
	}
	m := imagepull.NewManager(records, policy, a.clock())
	a.local = append(a.local, manager.RunnableFunc(func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return nil
		case <-connector.Connected():
		}
		images, err := a.cri.ListImages(ctx, nil)
		if err != nil {
			log.FromContext(ctx).Error(err, "Failed to list images, image pull intents of an earlier run are kept")
			return nil
		}
		m.Initialize(ctx, runtimeImages(images))
		return nil
	}))
	return m, nil
}

// runtimeImages are the runtime's images as the pull records see them: ID and every tag and digest.
func runtimeImages(images []*runtimeapi.Image) []imagepull.Image {
	out := make([]imagepull.Image, 0, len(images))
	for _, img := range images {
		out = append(out, imagepull.Image{ID: img.Id, Tags: append(append([]string(nil), img.RepoTags...), img.RepoDigests...)})
	}
	return out
}
