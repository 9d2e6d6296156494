package config

import (
	"fmt"
	"math"
	"net"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeletapis "k8s.io/kubelet/pkg/apis"
)

// Validate checks c and returns all problems as one aggregated error whose
// entries name the offending field (KubeletConfiguration JSON path) or flag.
// It returns nil when c is valid.
func Validate(c *Config) error {
	var errs field.ErrorList
	errs = append(errs, ValidateKubelet(&c.Kubelet)...)
	errs = append(errs, validateNodeIPs(c.NodeIPs, field.NewPath("--node-ip"))...)
	errs = append(errs, validateNodeLabels(c.NodeLabels, field.NewPath("--node-labels"))...)
	errs = append(errs, validateMetricsAddress(c.MetricsBindAddress, field.NewPath("--metrics-bind-address"))...)
	if c.RootDir == "" {
		errs = append(errs, field.Required(field.NewPath("--root-dir"), "must not be empty"))
	}
	errs = append(errs, validateEnum(c.CloudProvider, field.NewPath("--cloud-provider"), "", cloudProviderExternal)...)
	if c.MinimumGCAge < 0 {
		// The kubelet's NewContainerGC refuses it at start-up.
		errs = append(errs, field.Invalid(field.NewPath("--minimum-container-ttl-duration"), c.MinimumGCAge.String(), "invalid minimum garbage collection age"))
	}
	if c.ExitOnLockContention && c.LockFile == "" {
		errs = append(errs, field.Required(field.NewPath("--lock-file"), "--exit-on-lock-contention needs a lock file"))
	}
	return errs.ToAggregate()
}

// ValidateKubelet validates a (defaulted) KubeletConfiguration.
func ValidateKubelet(k *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateDurations(k)...)
	errs = append(errs, validateNumbers(k)...)
	errs = append(errs, validateServer(k)...)
	errs = append(errs, validateTLS(k)...)
	errs = append(errs, validateImagePullCredentials(k)...)
	errs = append(errs, validateRuntime(k)...)
	errs = append(errs, validateEviction(k)...)
	errs = append(errs, validateReserved(k.SystemReserved, field.NewPath("systemReserved"))...)
	errs = append(errs, validateReserved(k.KubeReserved, field.NewPath("kubeReserved"))...)
	errs = append(errs, validateImageGC(k)...)
	errs = append(errs, validateShutdown(k)...)
	errs = append(errs, validateUserNamespaces(k)...)
	errs = append(errs, validateEnum(k.Logging.Format, field.NewPath("logging", "format"), "text", "json")...)
	for i, t := range k.RegisterWithTaints {
		errs = append(errs, validateTaint(t, field.NewPath("registerWithTaints").Index(i))...)
	}
	return errs
}

func validateDurations(k *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	positive := map[string]metav1.Duration{
		"syncFrequency":             k.SyncFrequency,
		"fileCheckFrequency":        k.FileCheckFrequency,
		"httpCheckFrequency":        k.HTTPCheckFrequency,
		"nodeStatusUpdateFrequency": k.NodeStatusUpdateFrequency,
		"nodeStatusReportFrequency": k.NodeStatusReportFrequency,
		"runtimeRequestTimeout":     k.RuntimeRequestTimeout,
	}
	for _, name := range sortedKeys(positive) {
		if d := positive[name].Duration; d <= 0 {
			errs = append(errs, field.Invalid(field.NewPath(name), d.String(), "must be a positive duration"))
		}
	}
	nonNegative := map[string]metav1.Duration{
		"imageMinimumGCAge":                k.ImageMinimumGCAge,
		"imageMaximumGCAge":                k.ImageMaximumGCAge,
		"streamingConnectionIdleTimeout":   k.StreamingConnectionIdleTimeout,
		"evictionPressureTransitionPeriod": k.EvictionPressureTransitionPeriod,
	}
	for _, name := range sortedKeys(nonNegative) {
		if d := nonNegative[name].Duration; d < 0 {
			errs = append(errs, field.Invalid(field.NewPath(name), d.String(), "must not be negative"))
		}
	}
	return errs
}

// validateShutdown checks graceful node shutdown's periods as the kubelet does.
func validateShutdown(k *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	period, critical := k.ShutdownGracePeriod.Duration, k.ShutdownGracePeriodCriticalPods.Duration
	if critical > period {
		errs = append(errs, field.Invalid(field.NewPath("shutdownGracePeriodCriticalPods"), critical.String(), "must be <= shutdownGracePeriod "+period.String()))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"shutdownGracePeriod", period}, {"shutdownGracePeriodCriticalPods", critical}} {
		if f.d < 0 || (f.d > 0 && f.d < time.Second) {
			errs = append(errs, field.Invalid(field.NewPath(f.name), f.d.String(), "must be either zero or otherwise >= 1 sec"))
		}
	}
	if len(k.ShutdownGracePeriodByPodPriority) != 0 && (period > 0 || critical > 0) {
		errs = append(errs, field.Forbidden(field.NewPath("shutdownGracePeriodByPodPriority"), "Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"))
	}
	return errs
}

// validateUserNamespaces checks userNamespaces.idsPerPod as the kubelet: whole units of 65536 IDs, at
// most 2^32-1.
func validateUserNamespaces(k *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	if k.UserNamespaces == nil || k.UserNamespaces.IDsPerPod == nil {
		return nil
	}
	const unit = 65536
	p, n := field.NewPath("userNamespaces", "idsPerPod"), *k.UserNamespaces.IDsPerPod
	switch {
	case n < unit:
		return field.ErrorList{field.Invalid(p, n, fmt.Sprintf("must not be less than %d", unit))}
	case n%unit != 0:
		return field.ErrorList{field.Invalid(p, n, fmt.Sprintf("must be a multiple of %d", unit))}
	case n > math.MaxUint32:
		return field.ErrorList{field.Invalid(p, n, fmt.Sprintf("must not be more than %d", uint64(math.MaxUint32)))}
	}
	return nil
}

func validateNumbers(k *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	if k.NodeLeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("nodeLeaseDurationSeconds"), k.NodeLeaseDurationSeconds, "must be greater than 0"))
	}
	if k.MaxPods < 0 {
		errs = append(errs, field.Invalid(field.NewPath("maxPods"), k.MaxPods, "must not be negative"))
	}
	if k.OOMScoreAdj != nil && (*k.OOMScoreAdj < -1000 || *k.OOMScoreAdj > 1000) {
		errs = append(errs, field.Invalid(field.NewPath("oomScoreAdj"), *k.OOMScoreAdj, "must be between -1000 and 1000"))
	}
	if k.ContainerLogMaxWorkers != nil && *k.ContainerLogMaxWorkers < 1 {
		errs = append(errs, field.Invalid(field.NewPath("containerLogMaxWorkers"), *k.ContainerLogMaxWorkers, "must be at least 1"))
	}
	if k.ContainerLogMaxFiles != nil && *k.ContainerLogMaxFiles <= 1 {
		errs = append(errs, field.Invalid(field.NewPath("containerLogMaxFiles"), *k.ContainerLogMaxFiles, "must be greater than 1"))
	}
	if f := k.MemoryThrottlingFactor; f != nil && (*f <= 0 || *f > 1) {
		errs = append(errs, field.Invalid(field.NewPath("memoryThrottlingFactor"), *f, "must be greater than 0 and at most 1.0"))
	}
	return errs
}

func validateServer(k *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validatePort(k.Port, false, field.NewPath("port"))...)
	errs = append(errs, validatePort(k.ReadOnlyPort, true, field.NewPath("readOnlyPort"))...)
	if k.HealthzPort != nil {
		errs = append(errs, validatePort(*k.HealthzPort, true, field.NewPath("healthzPort"))...)
	}
	errs = append(errs, validateIP(k.Address, field.NewPath("address"))...)
	errs = append(errs, validateIP(k.HealthzBindAddress, field.NewPath("healthzBindAddress"))...)
	for i, dns := range k.ClusterDNS {
		errs = append(errs, validateIP(dns, field.NewPath("clusterDNS").Index(i))...)
	}
	errs = append(errs, validateEnum(string(k.Authorization.Mode), field.NewPath("authorization", "mode"),
		string(kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow), string(kubeletconfigv1beta1.KubeletAuthorizationModeWebhook))...)
	return errs
}

func validatePort(port int32, zeroOK bool, p *field.Path) field.ErrorList {
	if port == 0 && zeroOK {
		return nil
	}
	if port < 1 || port > 65535 {
		lo := "1"
		if zeroOK {
			lo = "0"
		}
		return field.ErrorList{field.Invalid(p, port, "must be between "+lo+" and 65535, inclusive")}
	}
	return nil
}

func validateIP(s string, p *field.Path) field.ErrorList {
	if net.ParseIP(s) == nil {
		return field.ErrorList{field.Invalid(p, s, "must be a valid IP address")}
	}
	return nil
}

func validateEnum(v string, p *field.Path, allowed ...string) field.ErrorList {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(p, v, allowed)}
}

func validateRuntime(k *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateEnum(k.CgroupDriver, field.NewPath("cgroupDriver"), "cgroupfs", "systemd")...)
	errs = append(errs, validateEnum(k.HairpinMode, field.NewPath("hairpinMode"),
		kubeletconfigv1beta1.PromiscuousBridge, kubeletconfigv1beta1.HairpinVeth, kubeletconfigv1beta1.HairpinNone)...)
	errs = append(errs, validateEnum(k.TopologyManagerPolicy, field.NewPath("topologyManagerPolicy"),
		kubeletconfigv1beta1.NoneTopologyManagerPolicy, kubeletconfigv1beta1.BestEffortTopologyManagerPolicy,
		kubeletconfigv1beta1.RestrictedTopologyManagerPolicy, kubeletconfigv1beta1.SingleNumaNodeTopologyManagerPolicy)...)
	errs = append(errs, validateEnum(k.TopologyManagerScope, field.NewPath("topologyManagerScope"),
		kubeletconfigv1beta1.ContainerTopologyManagerScope, kubeletconfigv1beta1.PodTopologyManagerScope)...)
	errs = append(errs, validateEnum(k.MemorySwap.SwapBehavior, field.NewPath("memorySwap", "swapBehavior"), "", "NoSwap", "LimitedSwap")...)
	errs = append(errs, validateEndpoint(k.ContainerRuntimeEndpoint, field.NewPath("containerRuntimeEndpoint"))...)
	if k.ImageServiceEndpoint != "" {
		errs = append(errs, validateEndpoint(k.ImageServiceEndpoint, field.NewPath("imageServiceEndpoint"))...)
	}
	if k.PodLogsDir == "" || !filepath.IsAbs(k.PodLogsDir) || filepath.Clean(k.PodLogsDir) != k.PodLogsDir {
		errs = append(errs, field.Invalid(field.NewPath("podLogsDir"), k.PodLogsDir, "must be a normalized absolute path"))
	}
	return errs
}

// validateEndpoint accepts unix:///abs/path, or a bare absolute path (which
// the kubelet treats as a unix socket).
func validateEndpoint(ep string, p *field.Path) field.ErrorList {
	if ep == "" {
		return field.ErrorList{field.Required(p, "a CRI endpoint is required")}
	}
	path := ep
	if rest, ok := strings.CutPrefix(ep, "unix://"); ok {
		path = rest
	} else if strings.Contains(ep, "://") {
		return field.ErrorList{field.Invalid(p, ep, "only unix:// endpoints are supported")}
	}
	if !filepath.IsAbs(path) {
		return field.ErrorList{field.Invalid(p, ep, "must be unix:///absolute/path or an absolute socket path")}
	}
	return nil
}

func validateEviction(k *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateThresholds(k.EvictionHard, field.NewPath("evictionHard"))...)
	errs = append(errs, validateThresholds(k.EvictionSoft, field.NewPath("evictionSoft"))...)
	gp := field.NewPath("evictionSoftGracePeriod")
	for _, signal := range sortedKeys(k.EvictionSoftGracePeriod) {
		v := k.EvictionSoftGracePeriod[signal]
		if !knownSignals[signal] {
			errs = append(errs, field.NotSupported(gp.Key(signal), signal, sortedKeys(knownSignals)))
		} else if d, err := time.ParseDuration(v); err != nil || d < 0 {
			errs = append(errs, field.Invalid(gp.Key(signal), v, "must be a non-negative duration"))
		}
	}
	for _, signal := range sortedKeys(k.EvictionSoft) {
		if _, ok := k.EvictionSoftGracePeriod[signal]; !ok {
			errs = append(errs, field.Required(gp.Key(signal), "a grace period is required for each evictionSoft signal"))
		}
	}
	return errs
}

func validateThresholds(m map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, signal := range sortedKeys(m) {
		if _, err := parseThreshold(signal, m[signal]); err != nil {
			errs = append(errs, field.Invalid(p.Key(signal), m[signal], err.Error()))
		}
	}
	return errs
}

func validateReserved(m map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedKeys(m) {
		if _, err := parseReserved(name, m[name]); err != nil {
			errs = append(errs, field.Invalid(p.Key(name), m[name], err.Error()))
		}
	}
	return errs
}

// validateImageGC checks the image garbage collection settings as the kubelet does: thresholds in
// 0..100 with low below high, and a maximum age (which needs the ImageMaximumGCAge gate, on by default)
// above the minimum age. Negative ages are validateDurations'.
func validateImageGC(k *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	high, low := k.ImageGCHighThresholdPercent, k.ImageGCLowThresholdPercent
	for _, f := range []struct {
		name string
		v    *int32
	}{{"imageGCHighThresholdPercent", high}, {"imageGCLowThresholdPercent", low}} {
		if f.v != nil && (*f.v < 0 || *f.v > 100) {
			errs = append(errs, field.Invalid(field.NewPath(f.name), *f.v, "must be between 0 and 100, inclusive"))
		}
	}
	if high != nil && low != nil && *low >= *high {
		errs = append(errs, field.Invalid(field.NewPath("imageGCLowThresholdPercent"), *low,
			fmt.Sprintf("must be less than imageGCHighThresholdPercent (%d)", *high)))
	}
	maxAge, minAge := k.ImageMaximumGCAge.Duration, k.ImageMinimumGCAge.Duration
	if maxAge != 0 && !gateEnabled(k, gateImageMaximumGCAge) {
		errs = append(errs, field.Forbidden(field.NewPath("imageMaximumGCAge"), "ImageMaximumGCAge feature gate is required"))
	}
	if maxAge > 0 && maxAge <= minAge {
		errs = append(errs, field.Invalid(field.NewPath("imageMaximumGCAge"), maxAge.String(),
			fmt.Sprintf("must be greater than imageMinimumGCAge (%v)", minAge)))
	}
	return errs
}

var taintEffects = []string{
	string(corev1.TaintEffectNoSchedule),
	string(corev1.TaintEffectPreferNoSchedule),
	string(corev1.TaintEffectNoExecute),
}

func validateTaint(t corev1.Taint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(t.Key) {
		errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
	}
	for _, msg := range validation.IsValidLabelValue(t.Value) {
		errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
	}
	errs = append(errs, validateEnum(string(t.Effect), p.Child("effect"), taintEffects...)...)
	if t.TimeAdded != nil {
		errs = append(errs, field.Forbidden(p.Child("timeAdded"), "must not be set"))
	}
	return errs
}

// validateNodeIPs applies the kubelet's --node-ip rule: one IP, or a
// dual-stack pair (one IPv4 and one IPv6, neither unspecified).
func validateNodeIPs(ips []net.IP, p *field.Path) field.ErrorList {
	switch {
	case len(ips) > 2:
		return field.ErrorList{field.Invalid(p, ipsString(ips), "must contain either a single IP or a dual-stack pair of IPs")}
	case len(ips) == 2 && (ips[0].To4() == nil) == (ips[1].To4() == nil):
		return field.ErrorList{field.Invalid(p, ipsString(ips), "must contain at most one IPv4 and one IPv6 address")}
	case len(ips) == 2 && (ips[0].IsUnspecified() || ips[1].IsUnspecified()):
		return field.ErrorList{field.Invalid(p, ipsString(ips), "dual-stack node IP cannot include '0.0.0.0' or '::'")}
	}
	return nil
}

func ipsString(ips []net.IP) string {
	return (&nodeIPValue{p: &ips}).String()
}

// validateNodeLabels applies the kubelet's --node-labels checks, including
// the NodeRestriction rule for kubernetes.io / k8s.io label namespaces.
func validateNodeLabels(labels map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(labels) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(labels[k]) {
			errs = append(errs, field.Invalid(p.Key(k), labels[k], msg))
		}
		if isKubernetesLabel(k) && !kubeletapis.IsKubeletLabel(k) {
			errs = append(errs, field.Forbidden(p.Key(k), fmt.Sprintf(
				"labels in the 'kubernetes.io' or 'k8s.io' namespaces must begin with an allowed prefix (%s) or be in the allowed set (%s)",
				strings.Join(kubeletapis.KubeletLabelNamespaces(), ", "), strings.Join(kubeletapis.KubeletLabels(), ", "))))
		}
	}
	return errs
}

func isKubernetesLabel(key string) bool {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	return ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") ||
		ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
}

func validateMetricsAddress(addr string, p *field.Path) field.ErrorList {
	if addr == "0" {
		return nil
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return field.ErrorList{field.Invalid(p, addr, "must be host:port, or \"0\" to disable")}
	}
	return nil
}
