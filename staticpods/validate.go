package staticpods

import (
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodelet/nodelet/podrules"
)

// validatePod checks, after defaulting and naming, the parts of the API's create validation whose
// violation would break the node: names, containers, images, ports, volumes and mounts, policies,
// resources and probes.
func validatePod(pod *corev1.Pod) field.ErrorList {
	errs := validateMeta(&pod.ObjectMeta, field.NewPath("metadata"))
	return append(errs, validateSpec(&pod.Spec, field.NewPath("spec"))...)
}

func validateMeta(meta *metav1.ObjectMeta, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(meta.Name) {
		errs = append(errs, field.Invalid(path.Child("name"), meta.Name, msg))
	}
	for _, msg := range validation.IsDNS1123Label(meta.Namespace) {
		errs = append(errs, field.Invalid(path.Child("namespace"), meta.Namespace, msg))
	}
	// The kubelet keeps a manifest's uid as it is; it names the pod's directories, so it must be a single
	// path segment ("../../.." would make the pod's directory a host directory, removed with the pod).
	if err := podrules.PathSegment("uid", string(meta.UID)); err != nil {
		errs = append(errs, field.Invalid(path.Child("uid"), meta.UID, err.Error()))
	}
	errs = append(errs, metav1validation.ValidateLabels(meta.Labels, path.Child("labels"))...)
	return append(errs, apimachineryvalidation.ValidateAnnotations(meta.Annotations, path.Child("annotations"))...)
}

var (
	restartPolicies          = sets.New(corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)
	dnsPolicies              = sets.New(corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault, corev1.DNSNone)
	pullPolicies             = sets.New(corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever)
	terminationMsgPolicies   = sets.New(corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError)
	protocols                = sets.New(corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP)
	containerRestartPolicies = sets.New(corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever)
)

func validateSpec(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	volumes, errs := validateVolumes(spec.Volumes, path.Child("volumes"))
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), "must have at least one container"))
	}
	names := sets.New[string]()
	errs = append(errs, validateContainers(spec.InitContainers, path.Child("initContainers"), names, volumes)...)
	errs = append(errs, validateContainers(spec.Containers, path.Child("containers"), names, volumes)...)
	if len(spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(path.Child("ephemeralContainers"), "cannot be set on create"))
	}
	errs = append(errs, validateEnum(spec.RestartPolicy, restartPolicies, path.Child("restartPolicy"))...)
	errs = append(errs, validateEnum(spec.DNSPolicy, dnsPolicies, path.Child("dnsPolicy"))...)
	errs = append(errs, validateHostPorts(spec, path)...)
	return errs
}

func validateEnum[T ~string](v T, allowed sets.Set[T], path *field.Path) field.ErrorList {
	if allowed.Has(v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(path, v, sets.List(allowed))}
}

func validateVolumes(vols []corev1.Volume, path *field.Path) (sets.Set[string], field.ErrorList) {
	names := sets.New[string]()
	var errs field.ErrorList
	for i := range vols {
		p := path.Index(i)
		errs = append(errs, validateName(vols[i].Name, p.Child("name"), names)...)
		if volumeSourceCount(&vols[i].VolumeSource) > 1 {
			errs = append(errs, field.Forbidden(p, "may not specify more than 1 volume type"))
		}
		if hp := vols[i].HostPath; hp != nil && hp.Path == "" {
			errs = append(errs, field.Required(p.Child("hostPath", "path"), ""))
		}
	}
	return names, errs
}

// volumeSourceCount counts the volume types set in a VolumeSource (all its fields are pointers).
func volumeSourceCount(src *corev1.VolumeSource) int {
	n := 0
	v := reflect.ValueOf(src).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}

// validateName checks a DNS-1123 label that must be unique among seen, and records it.
func validateName(name string, path *field.Path, seen sets.Set[string]) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(path, "")}
	case seen.Has(name):
		return field.ErrorList{field.Duplicate(path, name)}
	}
	seen.Insert(name)
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

func validateContainers(cs []corev1.Container, path *field.Path, names, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	for i := range cs {
		p := path.Index(i)
		errs = append(errs, validateName(cs[i].Name, p.Child("name"), names)...)
		errs = append(errs, validateContainer(&cs[i], p, volumes)...)
	}
	return errs
}

func validateContainer(c *corev1.Container, path *field.Path, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	if c.Image == "" {
		errs = append(errs, field.Required(path.Child("image"), ""))
	} else if strings.TrimSpace(c.Image) != c.Image {
		errs = append(errs, field.Invalid(path.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	errs = append(errs, validateEnum(c.ImagePullPolicy, pullPolicies, path.Child("imagePullPolicy"))...)
	errs = append(errs, validateEnum(c.TerminationMessagePolicy, terminationMsgPolicies, path.Child("terminationMessagePolicy"))...)
	if c.RestartPolicy != nil {
		errs = append(errs, validateEnum(*c.RestartPolicy, containerRestartPolicies, path.Child("restartPolicy"))...)
	}
	errs = append(errs, validatePorts(c.Ports, path.Child("ports"))...)
	errs = append(errs, validateMounts(c.VolumeMounts, path.Child("volumeMounts"), volumes)...)
	errs = append(errs, validateEnv(c.Env, path.Child("env"))...)
	errs = append(errs, validateResources(&c.Resources, path.Child("resources"))...)
	errs = append(errs, validateProbe(c.LivenessProbe, path.Child("livenessProbe"))...)
	errs = append(errs, validateProbe(c.ReadinessProbe, path.Child("readinessProbe"))...)
	return append(errs, validateProbe(c.StartupProbe, path.Child("startupProbe"))...)
}

func validatePorts(ports []corev1.ContainerPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range ports {
		errs = append(errs, validatePort(&ports[i], path.Index(i), names)...)
	}
	return errs
}

func validatePort(port *corev1.ContainerPort, path *field.Path, names sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
		errs = append(errs, field.Invalid(path.Child("containerPort"), port.ContainerPort, msg))
	}
	if port.HostPort != 0 {
		for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
			errs = append(errs, field.Invalid(path.Child("hostPort"), port.HostPort, msg))
		}
	}
	errs = append(errs, validateEnum(port.Protocol, protocols, path.Child("protocol"))...)
	if port.Name == "" {
		return errs
	}
	if names.Has(port.Name) {
		return append(errs, field.Duplicate(path.Child("name"), port.Name))
	}
	names.Insert(port.Name)
	for _, msg := range validation.IsValidPortName(port.Name) {
		errs = append(errs, field.Invalid(path.Child("name"), port.Name, msg))
	}
	return errs
}

// validateHostPorts rejects two containers asking for the same host port, and, on the host network, a
// host port other than the container port.
func validateHostPorts(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i := range spec.Containers {
		for j, port := range spec.Containers[i].Ports {
			p := path.Child("containers").Index(i).Child("ports").Index(j)
			if spec.HostNetwork && port.HostPort != port.ContainerPort {
				errs = append(errs, field.Invalid(p.Child("containerPort"), port.ContainerPort, "must match `hostPort` when `hostNetwork` is true"))
			}
			if port.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen.Has(key) {
				errs = append(errs, field.Duplicate(p.Child("hostPort"), key))
			}
			seen.Insert(key)
		}
	}
	return errs
}

func validateMounts(mounts []corev1.VolumeMount, path *field.Path, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	paths := sets.New[string]()
	for i, m := range mounts {
		p := path.Index(i)
		if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(p.Child("name"), m.Name))
		}
		switch {
		case m.MountPath == "":
			errs = append(errs, field.Required(p.Child("mountPath"), ""))
		case paths.Has(m.MountPath):
			errs = append(errs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths.Insert(m.MountPath)
	}
	return errs
}

func validateEnv(env []corev1.EnvVar, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range env {
		p := path.Index(i).Child("name")
		switch {
		case e.Name == "":
			errs = append(errs, field.Required(p, ""))
		case strings.Contains(e.Name, "="):
			errs = append(errs, field.Invalid(p, e.Name, "must not contain '='"))
		}
	}
	return errs
}

func validateResources(r *corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, q := range r.Limits {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("limits").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
	}
	for name, q := range r.Requests {
		p := path.Child("requests").Key(string(name))
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p, q.String(), "must be greater than or equal to 0"))
		}
		if limit, ok := r.Limits[name]; ok && q.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	return errs
}

func validateProbe(probe *corev1.Probe, path *field.Path) field.ErrorList {
	if probe == nil {
		return nil
	}
	h := &probe.ProbeHandler
	n := 0
	for _, set := range []bool{h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.GRPC != nil} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return field.ErrorList{field.Required(path, "must specify a handler type")}
	case n > 1:
		return field.ErrorList{field.Forbidden(path, "may not specify more than 1 handler type")}
	}
	var errs field.ErrorList
	if h.HTTPGet != nil {
		errs = append(errs, validatePortRef(h.HTTPGet.Port, path.Child("httpGet", "port"))...)
	}
	if h.TCPSocket != nil {
		errs = append(errs, validatePortRef(h.TCPSocket.Port, path.Child("tcpSocket", "port"))...)
	}
	return errs
}

// validatePortRef checks a probe's port: a number 1-65535 or a port name.
func validatePortRef(port intstr.IntOrString, path *field.Path) field.ErrorList {
	var msgs []string
	if port.Type == intstr.Int {
		msgs = validation.IsValidPortNum(port.IntValue())
	} else {
		msgs = validation.IsValidPortName(port.StrVal)
	}
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(path, port.String(), msg))
	}
	return errs
}
