package staticpods

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Defaults of a v1 Pod (k8s.io/kubernetes/pkg/apis/core/v1/defaults.go) that the pod lifecycle reads.
const (
	defaultGracePeriodSeconds = int64(corev1.DefaultTerminationGracePeriodSeconds)
	defaultVolumeMode         = int32(0o644)
)

// setStaticDefaults is the kubelet's applyDefaults minus the UID: name suffixed with the node, default
// namespace, bound to the node, config annotations, NoExecute toleration (file source only, as the
// kubelet) and phase Pending.
func setStaticDefaults(pod *corev1.Pod, nodeName, kind string) {
	pod.Name = pod.Name + "-" + strings.ToLower(nodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	// The Store owns config.seen; a manifest cannot pose as a mirror pod.
	delete(pod.Annotations, AnnotationConfigSeen)
	delete(pod.Annotations, AnnotationConfigMirror)
	pod.Annotations[AnnotationConfigHash] = string(pod.UID)
	pod.Annotations[AnnotationConfigSource] = kind
	if kind == SourceFile {
		addOrUpdateToleration(&pod.Spec, corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
}

// addOrUpdateToleration adds t, or replaces the toleration that matches it (key, operator, value, effect).
func addOrUpdateToleration(spec *corev1.PodSpec, t corev1.Toleration) {
	for i := range spec.Tolerations {
		if spec.Tolerations[i].MatchToleration(&t) {
			spec.Tolerations[i] = t
			return
		}
	}
	spec.Tolerations = append(spec.Tolerations, t)
}

// setAPIDefaults applies the API server's defaults for a v1 Pod that matter on the node.
func setAPIDefaults(pod *corev1.Pod) {
	setPodSpecDefaults(&pod.Spec)
	for i := range pod.Spec.Volumes {
		setVolumeDefaults(&pod.Spec.Volumes[i])
	}
	for i := range pod.Spec.InitContainers {
		setContainerDefaults(&pod.Spec.InitContainers[i], pod.Spec.HostNetwork)
	}
	for i := range pod.Spec.Containers {
		setContainerDefaults(&pod.Spec.Containers[i], pod.Spec.HostNetwork)
	}
}

func setPodSpecDefaults(spec *corev1.PodSpec) {
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount //nolint:staticcheck // kept in sync as the API does
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName //nolint:staticcheck // see above
	spec.DNSPolicy = orDefault(spec.DNSPolicy, corev1.DNSClusterFirst)
	spec.RestartPolicy = orDefault(spec.RestartPolicy, corev1.RestartPolicyAlways)
	spec.SchedulerName = orDefault(spec.SchedulerName, corev1.DefaultSchedulerName)
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	switch {
	case spec.TerminationGracePeriodSeconds == nil:
		spec.TerminationGracePeriodSeconds = ptr.To(defaultGracePeriodSeconds)
	case *spec.TerminationGracePeriodSeconds < 0:
		spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr.To(corev1.DefaultEnableServiceLinks)
	}
}

func orDefault[T ~string](v, def T) T {
	if v == "" {
		return def
	}
	return v
}

func setVolumeDefaults(v *corev1.Volume) {
	if volumeSourceCount(&v.VolumeSource) == 0 {
		v.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	}
	if v.HostPath != nil && v.HostPath.Type == nil {
		v.HostPath.Type = ptr.To(corev1.HostPathUnset)
	}
	if v.DownwardAPI != nil {
		setModeDefault(&v.DownwardAPI.DefaultMode)
		setDownwardItemsDefaults(v.DownwardAPI.Items)
	}
	if v.Projected != nil {
		setModeDefault(&v.Projected.DefaultMode)
		for i := range v.Projected.Sources {
			if d := v.Projected.Sources[i].DownwardAPI; d != nil {
				setDownwardItemsDefaults(d.Items)
			}
		}
	}
}

func setModeDefault(mode **int32) {
	if *mode == nil {
		*mode = ptr.To(defaultVolumeMode)
	}
}

func setDownwardItemsDefaults(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		setFieldRefDefaults(items[i].FieldRef)
	}
}

func setFieldRefDefaults(ref *corev1.ObjectFieldSelector) {
	if ref != nil && ref.APIVersion == "" {
		ref.APIVersion = "v1"
	}
}

func setContainerDefaults(c *corev1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = pullPolicyFor(c.Image)
	}
	c.TerminationMessagePath = orDefault(c.TerminationMessagePath, corev1.TerminationMessagePathDefault)
	c.TerminationMessagePolicy = orDefault(c.TerminationMessagePolicy, corev1.TerminationMessageReadFile)
	for i := range c.Ports {
		setPortDefaults(&c.Ports[i], hostNetwork)
	}
	for i := range c.Env {
		if c.Env[i].ValueFrom != nil {
			setFieldRefDefaults(c.Env[i].ValueFrom.FieldRef)
		}
	}
	setRequestsFromLimits(&c.Resources)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		setProbeDefaults(p)
	}
	if c.Lifecycle != nil {
		setHandlerDefaults(c.Lifecycle.PostStart)
		setHandlerDefaults(c.Lifecycle.PreStop)
	}
}

func setPortDefaults(p *corev1.ContainerPort, hostNetwork bool) {
	p.Protocol = orDefault(p.Protocol, corev1.ProtocolTCP)
	if hostNetwork && p.HostPort == 0 {
		p.HostPort = p.ContainerPort
	}
}

// setRequestsFromLimits defaults each request to its limit when only the limit is set.
func setRequestsFromLimits(r *corev1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = limit.DeepCopy()
		}
	}
}

func setProbeDefaults(p *corev1.Probe) {
	if p == nil {
		return
	}
	setInt32Default(&p.TimeoutSeconds, 1)
	setInt32Default(&p.PeriodSeconds, 10)
	setInt32Default(&p.SuccessThreshold, 1)
	setInt32Default(&p.FailureThreshold, 3)
	setHTTPGetDefaults(p.HTTPGet)
}

func setInt32Default(v *int32, def int32) {
	if *v == 0 {
		*v = def
	}
}

func setHandlerDefaults(h *corev1.LifecycleHandler) {
	if h != nil {
		setHTTPGetDefaults(h.HTTPGet)
	}
}

func setHTTPGetDefaults(g *corev1.HTTPGetAction) {
	if g == nil {
		return
	}
	if g.Path == "" {
		g.Path = "/"
	}
	g.Scheme = orDefault(g.Scheme, corev1.URISchemeHTTP)
}

// pullPolicyFor is Always for a ":latest" or untagged image and IfNotPresent otherwise (an image pinned by
// digest only has no tag, and is IfNotPresent), as the API's defaulting.
func pullPolicyFor(image string) corev1.PullPolicy {
	if imageTag(image) == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// imageTag returns the image reference's tag: "latest" when it has neither tag nor digest, "" when it has
// only a digest.
func imageTag(image string) string {
	name, _, hasDigest := strings.Cut(image, "@")
	lastSlash := strings.LastIndex(name, "/")
	if colon := strings.LastIndex(name, ":"); colon > lastSlash {
		return name[colon+1:]
	}
	if hasDigest {
		return ""
	}
	return "latest"
}
