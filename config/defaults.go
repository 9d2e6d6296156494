package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// Defaults reproduced from the kubelet (k8s.io/kubernetes v1.37
// pkg/kubelet/apis/config/v1beta1/defaults.go, cmd/kubelet/app/server.go and
// pkg/kubelet/eviction/defaults_linux.go), which is not importable.
const (
	DefaultRootDir                  = "/var/lib/kubelet"
	DefaultMetricsBindAddress       = "0"
	DefaultContainerRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	DefaultResolvConf               = "/etc/resolv.conf"
	DefaultVolumePluginDir          = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"
	DefaultPodLogsDir               = "/var/log/pods"
	DefaultKubeletPort              = 10250
	DefaultHealthzPort              = 10248
	DefaultIPTablesMasqueradeBit    = 14
	DefaultIPTablesDropBit          = 15
	kubeletOOMScoreAdj              = -999
	maxContainerBackOff             = 300 * time.Second

	// Feature gates (on by default in v1.37) that change defaulting, validation or what the node API serves.
	gateCrashLoopBackOffMax      = "KubeletCrashLoopBackOffMax"
	gateEnsureSecretPulledImages = "KubeletEnsureSecretPulledImages"
	gateImageMaximumGCAge        = "ImageMaximumGCAge"
	gateComponentFlagz           = "ComponentFlagz"
	gateComponentStatusz         = "ComponentStatusz"
	gateKubeletInUserNamespace   = "KubeletInUserNamespace"
)

// DefaultEvictionHard returns a fresh copy of the kubelet's Linux hard
// eviction thresholds.
func DefaultEvictionHard() map[string]string {
	return map[string]string{
		"memory.available":   "100Mi",
		"nodefs.available":   "10%",
		"nodefs.inodesFree":  "5%",
		"imagefs.available":  "15%",
		"imagefs.inodesFree": "5%",
	}
}

var zeroDuration = metav1.Duration{}

// SetDefaults applies the kubelet's defaults to every unset field of c.
// It is idempotent.
func SetDefaults(c *kubeletconfigv1beta1.KubeletConfiguration) {
	defaultServer(c)
	defaultAuth(c)
	defaultTimings(c)
	defaultNodeStatus(c)
	defaultImages(c)
	defaultResources(c)
	defaultRuntime(c)
	defaultEviction(c)
	defaultLogs(c)
	defaultHandlers(c)
	defaultGated(c)
}

func defDuration(d *metav1.Duration, v time.Duration) {
	if *d == zeroDuration {
		*d = metav1.Duration{Duration: v}
	}
}

func defDurationPtr(d **metav1.Duration, v time.Duration) {
	if *d == nil {
		*d = &metav1.Duration{Duration: v}
	}
}

func defPtr[T any](p **T, v T) {
	if *p == nil {
		*p = ptr.To(v)
	}
}

func defValue[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

func defaultServer(c *kubeletconfigv1beta1.KubeletConfiguration) {
	defPtr(&c.EnableServer, true)
	defValue(&c.Address, "0.0.0.0")
	defValue(&c.Port, int32(DefaultKubeletPort))
	defPtr(&c.HealthzPort, int32(DefaultHealthzPort))
	defValue(&c.HealthzBindAddress, "127.0.0.1")
	defDuration(&c.StreamingConnectionIdleTimeout, 4*time.Hour)
	defValue(&c.ContentType, "application/vnd.kubernetes.protobuf")
	defPtr(&c.KubeAPIQPS, int32(50))
	defValue(&c.KubeAPIBurst, int32(100))
	defPtr(&c.EventRecordQPS, int32(50))
	defValue(&c.EventBurst, int32(100))
	defPtr(&c.RegisterNode, true)
}

func defaultAuth(c *kubeletconfigv1beta1.KubeletConfiguration) {
	defPtr(&c.Authentication.Anonymous.Enabled, false)
	defPtr(&c.Authentication.Webhook.Enabled, true)
	defDuration(&c.Authentication.Webhook.CacheTTL, 2*time.Minute)
	defValue(&c.Authorization.Mode, kubeletconfigv1beta1.KubeletAuthorizationModeWebhook)
	defDuration(&c.Authorization.Webhook.CacheAuthorizedTTL, 5*time.Minute)
	defDuration(&c.Authorization.Webhook.CacheUnauthorizedTTL, 30*time.Second)
}

func defaultTimings(c *kubeletconfigv1beta1.KubeletConfiguration) {
	defDuration(&c.SyncFrequency, time.Minute)
	defDuration(&c.FileCheckFrequency, 20*time.Second)
	defDuration(&c.HTTPCheckFrequency, 20*time.Second)
	defDuration(&c.RuntimeRequestTimeout, 2*time.Minute)
	defDuration(&c.VolumeStatsAggPeriod, time.Minute)
	defDuration(&c.CPUManagerReconcilePeriod, 10*time.Second)
}

// defaultNodeStatus follows the kubelet: nodeStatusReportFrequency defaults
// to nodeStatusUpdateFrequency when the latter was set explicitly, else 5m.
func defaultNodeStatus(c *kubeletconfigv1beta1.KubeletConfiguration) {
	if c.NodeStatusReportFrequency == zeroDuration {
		if c.NodeStatusUpdateFrequency == zeroDuration {
			c.NodeStatusReportFrequency = metav1.Duration{Duration: 5 * time.Minute}
		} else {
			c.NodeStatusReportFrequency = c.NodeStatusUpdateFrequency
		}
	}
	defDuration(&c.NodeStatusUpdateFrequency, 10*time.Second)
	defValue(&c.NodeLeaseDurationSeconds, int32(40))
	defPtr(&c.NodeStatusMaxImages, int32(50))
}

func defaultImages(c *kubeletconfigv1beta1.KubeletConfiguration) {
	defDuration(&c.ImageMinimumGCAge, 2*time.Minute)
	defPtr(&c.ImageGCHighThresholdPercent, int32(85))
	defPtr(&c.ImageGCLowThresholdPercent, int32(80))
	defPtr(&c.RegistryPullQPS, int32(5))
	defValue(&c.RegistryBurst, int32(10))
	if c.SerializeImagePulls == nil {
		parallel := c.MaxParallelImagePulls != nil && *c.MaxParallelImagePulls >= 2
		c.SerializeImagePulls = ptr.To(!parallel)
	}
}

func defaultResources(c *kubeletconfigv1beta1.KubeletConfiguration) {
	defPtr(&c.CgroupsPerQOS, true)
	defValue(&c.CgroupDriver, "cgroupfs")
	defValue(&c.CPUManagerPolicy, "none")
	defValue(&c.MemoryManagerPolicy, kubeletconfigv1beta1.NoneMemoryManagerPolicy)
	defValue(&c.TopologyManagerPolicy, kubeletconfigv1beta1.NoneTopologyManagerPolicy)
	defValue(&c.TopologyManagerScope, kubeletconfigv1beta1.ContainerTopologyManagerScope)
	defValue(&c.MaxPods, int32(110))
	if c.PodPidsLimit == nil || *c.PodPidsLimit < 0 {
		c.PodPidsLimit = ptr.To[int64](-1)
	}
	defPtr(&c.CPUCFSQuota, true)
	defDurationPtr(&c.CPUCFSQuotaPeriod, 100*time.Millisecond)
	defValue(&c.MaxOpenFiles, int64(1000000))
	defPtr(&c.OOMScoreAdj, int32(kubeletOOMScoreAdj))
	if c.EnforceNodeAllocatable == nil {
		c.EnforceNodeAllocatable = []string{"pods"}
	}
	defPtr(&c.LocalStorageCapacityIsolation, true)
	defPtr(&c.FailSwapOn, true)
	defPtr(&c.FailCgroupV1, true)
	defValue(&c.MemoryReservationPolicy, kubeletconfigv1beta1.NoneMemoryReservationPolicy)
}

func defaultRuntime(c *kubeletconfigv1beta1.KubeletConfiguration) {
	defValue(&c.ContainerRuntimeEndpoint, DefaultContainerRuntimeEndpoint)
	defValue(&c.HairpinMode, kubeletconfigv1beta1.PromiscuousBridge)
	defPtr(&c.ResolverConfig, DefaultResolvConf)
	defPtr(&c.EnableControllerAttachDetach, true)
	defPtr(&c.MakeIPTablesUtilChains, true)
	defPtr(&c.IPTablesMasqueradeBit, int32(DefaultIPTablesMasqueradeBit))
	defPtr(&c.IPTablesDropBit, int32(DefaultIPTablesDropBit))
	defValue(&c.ConfigMapAndSecretChangeDetectionStrategy, kubeletconfigv1beta1.WatchChangeDetectionStrategy)
	defValue(&c.VolumePluginDir, DefaultVolumePluginDir)
	defPtr(&c.SeccompDefault, false)
}

// defaultEviction: the kubelet fills evictionHard only when it is nil, or
// merges the missing default signals when mergeDefaultEvictionSettings is set.
func defaultEviction(c *kubeletconfigv1beta1.KubeletConfiguration) {
	defDuration(&c.EvictionPressureTransitionPeriod, 5*time.Minute)
	defPtr(&c.MergeDefaultEvictionSettings, false)
	if c.EvictionHard == nil {
		c.EvictionHard = DefaultEvictionHard()
		return
	}
	if *c.MergeDefaultEvictionSettings {
		for k, v := range DefaultEvictionHard() {
			if _, ok := c.EvictionHard[k]; !ok {
				c.EvictionHard[k] = v
			}
		}
	}
}

func defaultLogs(c *kubeletconfigv1beta1.KubeletConfiguration) {
	defValue(&c.ContainerLogMaxSize, "10Mi")
	defPtr(&c.ContainerLogMaxFiles, int32(5))
	defPtr(&c.ContainerLogMaxWorkers, int32(1))
	defDurationPtr(&c.ContainerLogMonitorInterval, 10*time.Second)
	defValue(&c.PodLogsDir, DefaultPodLogsDir)
	logsapi.SetRecommendedLoggingConfiguration(&c.Logging)
}

func defaultHandlers(c *kubeletconfigv1beta1.KubeletConfiguration) {
	defPtr(&c.EnableDebuggingHandlers, true)
	defPtr(&c.EnableSystemLogHandler, true)
	defPtr(&c.EnableProfilingHandler, true)
	defPtr(&c.EnableDebugFlagsHandler, true)
}

// defaultGated applies defaults that the kubelet ties to feature gates which
// are enabled by default; an explicit "false" in featureGates skips them.
func defaultGated(c *kubeletconfigv1beta1.KubeletConfiguration) {
	if gateEnabled(c, gateCrashLoopBackOffMax) {
		defDurationPtr(&c.CrashLoopBackOff.MaxContainerRestartPeriod, maxContainerBackOff)
	}
	if gateEnabled(c, gateEnsureSecretPulledImages) {
		defValue(&c.ImagePullCredentialsVerificationPolicy, kubeletconfigv1beta1.NeverVerifyPreloadedImages)
	}
}

func gateEnabled(c *kubeletconfigv1beta1.KubeletConfiguration, gate string) bool {
	v, ok := c.FeatureGates[gate]
	return !ok || v
}
