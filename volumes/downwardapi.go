package volumes

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation"
)

// downwardAPIPayload renders the items of a downwardAPI volume (or projection): pod fields
// (metadata.name, namespace, uid, labels, annotations, one label or annotation) and container
// resources (with their divisor; a missing limit defaults to the node's allocatable).
func downwardAPIPayload(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defaultMode int32, alloc corev1.ResourceList) (map[string]fileProjection, error) {
	payload := make(map[string]fileProjection, len(items))
	var errs []error
	for _, item := range items {
		var value string
		var err error
		switch {
		case item.FieldRef != nil:
			value, err = podFieldValue(pod, item.FieldRef.FieldPath)
		case item.ResourceFieldRef != nil:
			value, err = resourceFieldValue(pod, item.ResourceFieldRef, alloc)
		}
		if err != nil {
			errs = append(errs, err)
		}
		payload[filepath.Clean(item.Path)] = fileProjection{Data: []byte(value), Mode: modeOrDefault(item.Mode, defaultMode)}
	}
	return payload, utilerrors.NewAggregate(errs)
}

// podFieldValue is the kubelet's ExtractFieldPathAsString for the fields a volume may reference.
func podFieldValue(pod *corev1.Pod, fieldPath string) (string, error) {
	if path, key, ok := splitSubscript(fieldPath); ok {
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
		return "", fmt.Errorf("fieldPath %q does not support subscript", fieldPath)
	}
	switch fieldPath {
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %v", fieldPath)
}

// splitSubscript splits "metadata.labels['key']" into ("metadata.labels", "key").
func splitSubscript(fieldPath string) (string, string, bool) {
	s, ok := strings.CutSuffix(fieldPath, "']")
	if !ok {
		return fieldPath, "", false
	}
	path, key, ok := strings.Cut(s, "['")
	if !ok || path == "" {
		return fieldPath, "", false
	}
	return path, key, true
}

// formatMap renders a map as the kubelet does: one key="value" line per key, sorted, values quoted
// as Go strings, no trailing newline.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []byte
	for _, k := range keys {
		if len(b) > 0 {
			b = append(b, '\n')
		}
		b = append(b, k...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, m[k])
	}
	return string(b)
}

// resourceFieldValue is a container's request or limit in units of the divisor, rounded up. A limit
// the container does not set is the node's allocatable, as in the kubelet.
func resourceFieldValue(pod *corev1.Pod, ref *corev1.ResourceFieldSelector, alloc corev1.ResourceList) (string, error) {
	c := findContainer(pod, ref.ContainerName)
	if c == nil {
		return "", fmt.Errorf("container %s not found", ref.ContainerName)
	}
	limits := c.Resources.Limits.DeepCopy()
	if limits == nil {
		limits = corev1.ResourceList{}
	}
	for _, rn := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q, ok := limits[rn]; (!ok || q.IsZero()) && alloc != nil {
			if a, ok := alloc[rn]; ok {
				limits[rn] = a.DeepCopy()
			}
		}
	}
	return resourceValue(ref, c.Resources.Requests, limits)
}

func resourceValue(ref *corev1.ResourceFieldSelector, requests, limits corev1.ResourceList) (string, error) {
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, _ := strings.Cut(ref.Resource, ".")
	list := map[string]corev1.ResourceList{"limits": limits, "requests": requests}[kind]
	rn := corev1.ResourceName(name)
	switch {
	case list == nil:
	case rn == corev1.ResourceCPU:
		q := list[rn]
		return ceilDiv(q.MilliValue(), divisor.MilliValue()), nil
	case rn == corev1.ResourceMemory, rn == corev1.ResourceEphemeralStorage,
		strings.HasPrefix(name, corev1.ResourceHugePagesPrefix):
		q := list[rn]
		return ceilDiv(q.Value(), divisor.Value()), nil
	}
	return "", fmt.Errorf("unsupported container resource : %v", ref.Resource)
}

func ceilDiv(v, d int64) string {
	return strconv.FormatInt(int64(math.Ceil(float64(v)/float64(d))), 10)
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}
