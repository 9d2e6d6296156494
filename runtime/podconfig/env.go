package podconfig

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	envfile "k8s.io/kubernetes/pkg/kubelet/util/env"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/podrules"
)

// EnvSource fetches the ConfigMaps and Secrets that env/envFrom reference (by name: the node may not
// list them). A missing object is reported with an error for which apierrors.IsNotFound holds.
type EnvSource interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// EnvOptions are the node and pod facts a container's environment may refer to.
type EnvOptions struct {
	NodeName string
	HostIPs  []string // the node's IPs, primary first (status.hostIP, status.hostIPs)
	PodIPs   []string // the sandbox's IPs (status.podIP, status.podIPs)
	// ServiceEnv are the service link variables computed by the caller (FOO_SERVICE_HOST, ...): they are
	// visible to $(VAR) expansion and added last, each unless the container defines the same name.
	ServiceEnv map[string]string
	// NodeAllocatable is what resourceFieldRef reports for a limit the container does not set.
	NodeAllocatable corev1.ResourceList
	// VolumePath is where a volume of the pod is on the host, for fileKeyRef (nil: no volume is).
	VolumePath func(volume string) (string, error)
}

// MakeEnvironment resolves a container's environment like the kubelet's makeEnvironmentVariables: envFrom
// first, then env in order (value with $(VAR) expansion, or valueFrom), then the service variables the
// container does not override. The second result lists the envFrom keys skipped because they cannot be
// environment variable names (the caller may report them in an event). Errors match
// ErrCreateContainerConfig and carry the kubelet's message.
func MakeEnvironment(ctx context.Context, pod *corev1.Pod, c *corev1.Container, opts EnvOptions, src EnvSource) ([]*runtimeapi.KeyValue, []string, error) {
	r := &envResolver{ctx: ctx, pod: pod, c: c, opts: opts, src: src, env: newOrderedEnv(),
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	var skipped []string
	for i := range c.EnvFrom {
		s, err := r.addEnvFrom(&c.EnvFrom[i])
		if err != nil {
			return nil, nil, asConfigError(err)
		}
		skipped = append(skipped, s...)
	}
	for i := range c.Env {
		if err := r.addEnv(&c.Env[i]); err != nil {
			return nil, nil, asConfigError(err)
		}
	}
	return r.result(), skipped, nil
}

// orderedEnv is a set of variables that remembers the order names were first defined in.
type orderedEnv struct {
	names  []string
	values map[string]string
}

func newOrderedEnv() *orderedEnv { return &orderedEnv{values: map[string]string{}} }

func (e *orderedEnv) set(name, value string) {
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

// envResolver resolves one container's environment, fetching each ConfigMap and Secret once.
type envResolver struct {
	ctx        context.Context
	pod        *corev1.Pod
	c          *corev1.Container
	opts       EnvOptions
	src        EnvSource
	env        *orderedEnv
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
}

// result lists the container's variables in definition order, then the service variables (sorted)
// that it does not define.
func (r *envResolver) result() []*runtimeapi.KeyValue {
	out := make([]*runtimeapi.KeyValue, 0, len(r.env.names)+len(r.opts.ServiceEnv))
	for _, name := range r.env.names {
		out = append(out, &runtimeapi.KeyValue{Key: name, Value: []byte(r.env.values[name])})
	}
	svc := make([]string, 0, len(r.opts.ServiceEnv))
	for name := range r.opts.ServiceEnv {
		if _, defined := r.env.values[name]; !defined {
			svc = append(svc, name)
		}
	}
	sort.Strings(svc)
	for _, name := range svc {
		out = append(out, &runtimeapi.KeyValue{Key: name, Value: []byte(r.opts.ServiceEnv[name])})
	}
	return out
}

// addEnvFrom adds every key of a ConfigMap or Secret (sorted), with the prefix; a missing optional
// source adds nothing.
func (r *envResolver) addEnvFrom(ef *corev1.EnvFromSource) ([]string, error) {
	var data map[string]string
	switch {
	case ef.ConfigMapRef != nil:
		cm, err := r.configMap(ef.ConfigMapRef.Name, isOptional(ef.ConfigMapRef.Optional))
		if err != nil || cm == nil {
			return nil, err
		}
		data = cm.Data
	case ef.SecretRef != nil:
		s, err := r.secret(ef.SecretRef.Name, isOptional(ef.SecretRef.Optional))
		if err != nil || s == nil {
			return nil, err
		}
		data = make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			data[k] = string(v)
		}
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var skipped []string
	for _, k := range keys {
		name := ef.Prefix + k
		if len(validation.IsRelaxedEnvVarName(name)) != 0 {
			skipped = append(skipped, name)
			continue
		}
		r.env.set(name, data[k])
	}
	return skipped, nil
}

// addEnv resolves one env entry: a value with $(VAR) expanded against the variables defined so far and
// the service variables, or its valueFrom source. A missing optional source leaves the variable unset.
func (r *envResolver) addEnv(ev *corev1.EnvVar) error {
	if ev.Value != "" || ev.ValueFrom == nil {
		r.env.set(ev.Name, Expand(ev.Value, mappingFor(r.env.values, r.opts.ServiceEnv)))
		return nil
	}
	value, ok, err := r.valueFrom(ev.ValueFrom)
	if err != nil {
		return err
	}
	if ok {
		r.env.set(ev.Name, value)
	}
	return nil
}

// valueFrom resolves a variable's source; ok is false when an optional source is missing.
func (r *envResolver) valueFrom(vf *corev1.EnvVarSource) (value string, ok bool, err error) {
	switch {
	case vf.FieldRef != nil:
		value, err = r.fieldRef(vf.FieldRef)
		return value, err == nil, err
	case vf.ResourceFieldRef != nil:
		value, err = r.resourceFieldRef(vf.ResourceFieldRef)
		return value, err == nil, err
	case vf.ConfigMapKeyRef != nil:
		return r.configMapKey(vf.ConfigMapKeyRef)
	case vf.SecretKeyRef != nil:
		return r.secretKey(vf.SecretKeyRef)
	case vf.FileKeyRef != nil:
		return r.fileKey(vf.FileKeyRef)
	}
	return "", true, nil
}

// fileKey reads a variable from an env file in a volume of the pod (written by an init container, say), as
// the kubelet does: the file's path resolved inside the volume (no way out of it through ".." or a link), the
// file parsed by the kubelet's strict KEY='value' parser. A key the file lacks is an error unless optional;
// so is a file that does not parse, optional or not.
func (r *envResolver) fileKey(sel *corev1.FileKeySelector) (string, bool, error) {
	if r.opts.VolumePath == nil {
		return "", false, fmt.Errorf("cannot find the volume %q referenced by FileKeyRef", sel.VolumeName)
	}
	dir, err := r.opts.VolumePath(sel.VolumeName)
	if err != nil {
		return "", false, fmt.Errorf("cannot find the volume %q referenced by FileKeyRef", sel.VolumeName)
	}
	path, err := securejoin.SecureJoin(dir, sel.Path)
	if err != nil {
		return "", false, err
	}
	value, err := envfile.ParseEnv(path, sel.Key)
	if err != nil {
		ctrl.LoggerFrom(r.ctx).Error(err, "Failed to parse env file", "pod", klog.KObj(r.pod))
		return "", false, errors.New("couldn't parse env file")
	}
	if value == "" {
		if isOptional(sel.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("environment variable key %q not found in file %q", sel.Key, path)
	}
	return value, true, nil
}

func isOptional(b *bool) bool { return b != nil && *b }

// configMap fetches a ConfigMap once; nil without error when it is missing and optional.
func (r *envResolver) configMap(name string, optional bool) (*corev1.ConfigMap, error) {
	if cm, ok := r.configMaps[name]; ok {
		return cm, nil
	}
	cm, err := r.src.GetConfigMap(r.ctx, r.pod.Namespace, name)
	if err != nil {
		if optional && apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	r.configMaps[name] = cm
	return cm, nil
}

// secret fetches a Secret once; nil without error when it is missing and optional.
func (r *envResolver) secret(name string, optional bool) (*corev1.Secret, error) {
	if s, ok := r.secrets[name]; ok {
		return s, nil
	}
	s, err := r.src.GetSecret(r.ctx, r.pod.Namespace, name)
	if err != nil {
		if optional && apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	r.secrets[name] = s
	return s, nil
}

func (r *envResolver) configMapKey(sel *corev1.ConfigMapKeySelector) (string, bool, error) {
	optional := isOptional(sel.Optional)
	cm, err := r.configMap(sel.Name, optional)
	if err != nil || cm == nil {
		return "", false, err
	}
	if v, ok := cm.Data[sel.Key]; ok {
		return v, true, nil
	}
	if optional {
		return "", false, nil
	}
	return "", false, fmt.Errorf("couldn't find key %v in ConfigMap %v/%v", sel.Key, r.pod.Namespace, sel.Name)
}

func (r *envResolver) secretKey(sel *corev1.SecretKeySelector) (string, bool, error) {
	optional := isOptional(sel.Optional)
	s, err := r.secret(sel.Name, optional)
	if err != nil || s == nil {
		return "", false, err
	}
	if v, ok := s.Data[sel.Key]; ok {
		return string(v), true, nil
	}
	if optional {
		return "", false, nil
	}
	return "", false, fmt.Errorf("couldn't find key %v in Secret %v/%v", sel.Key, r.pod.Namespace, sel.Name)
}

// fieldRef resolves the downward API field paths the kubelet supports for env.
func (r *envResolver) fieldRef(fs *corev1.ObjectFieldSelector) (string, error) {
	if fs.APIVersion != "" && fs.APIVersion != "v1" {
		return "", fmt.Errorf("unsupported pod version: %s", fs.APIVersion)
	}
	switch fs.FieldPath {
	case "spec.nodeName", "spec.host":
		return r.pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return r.pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return r.hostIPs(fs.FieldPath)
	case "status.podIP", "status.podIPs":
		ips := podrules.SortPodIPs(r.opts.PodIPs, r.opts.HostIPs)
		if fs.FieldPath == "status.podIPs" {
			return strings.Join(ips, ","), nil
		}
		if len(ips) == 0 {
			return "", nil
		}
		return ips[0], nil
	}
	return PodMetadataField(r.pod, fs.FieldPath)
}

// PodMetadataField resolves the pod metadata the downward API exposes, for env and volumes alike (the
// kubelet's ExtractFieldPathAsString): metadata.name, namespace, uid, labels, annotations, and
// metadata.labels['k'] / metadata.annotations['k'].
func PodMetadataField(pod *corev1.Pod, fieldPath string) (string, error) {
	if path, key, ok := splitSubscriptedPath(fieldPath); ok {
		return subscriptedField(pod, fieldPath, path, key)
	}
	return metadataField(pod, fieldPath)
}

func (r *envResolver) hostIPs(path string) (string, error) {
	if len(r.opts.HostIPs) == 0 {
		return "", fmt.Errorf("host IP unknown; known addresses: []")
	}
	if path == "status.hostIP" {
		return r.opts.HostIPs[0], nil
	}
	return strings.Join(r.opts.HostIPs, ","), nil
}

// metadataField resolves the pod's unsubscripted metadata fields.
func metadataField(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %v", path)
}

// subscriptedField resolves metadata.labels['k'] and metadata.annotations['k'].
func subscriptedField(pod *corev1.Pod, fieldPath, path, key string) (string, error) {
	switch path {
	case "metadata.annotations":
		if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) != 0 {
			return "", fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, ";"))
		}
		return pod.Annotations[key], nil
	case "metadata.labels":
		if errs := validation.IsQualifiedName(key); len(errs) != 0 {
			return "", fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, ";"))
		}
		return pod.Labels[key], nil
	}
	return "", fmt.Errorf("field label does not support subscript: %s", fieldPath)
}

// splitSubscriptedPath splits "metadata.labels['k']" into "metadata.labels" and "k".
func splitSubscriptedPath(fieldPath string) (path, key string, ok bool) {
	s, found := strings.CutSuffix(fieldPath, "']")
	if !found {
		return fieldPath, "", false
	}
	path, key, found = strings.Cut(s, "['")
	if !found || path == "" {
		return fieldPath, "", false
	}
	return path, key, true
}

// formatMap renders a map as sorted key="quoted value" lines, like the downward API.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		lines = append(lines, k+"="+strconv.Quote(m[k]))
	}
	return strings.Join(lines, "\n")
}

// resourceFieldRef resolves requests/limits of cpu, memory, ephemeral-storage and hugepages of this or a
// named container (podrules.EnvResourceValue).
func (r *envResolver) resourceFieldRef(fs *corev1.ResourceFieldSelector) (string, error) {
	return podrules.EnvResourceValue(r.pod, r.c, fs, r.opts.NodeAllocatable)
}

// mappingFor looks a variable up in each context in turn; an undefined one stays a $(NAME) reference.
func mappingFor(contexts ...map[string]string) func(string) string {
	return func(name string) string {
		for _, vars := range contexts {
			if v, ok := vars[name]; ok {
				return v
			}
		}
		return "$(" + name + ")"
	}
}

// Expand replaces $(NAME) references in s with mapping(NAME), with the kubelet's semantics
// (third_party/forked/golang/expansion): "$$" is an escaped "$", a "$" not followed by "(" or "$" is
// kept as is, and an unterminated "$(" is kept literally.
func Expand(s string, mapping func(string) string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			b.WriteString(mapping(s[i+2 : i+2+end]))
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
