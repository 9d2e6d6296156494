package volumes

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/nodelet/nodelet/runtime"
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
			value, err = runtime.PodMetadataField(pod, item.FieldRef.FieldPath)
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
