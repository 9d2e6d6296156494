package podrules

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// defaultedLimits are the limits that read as a default when a container leaves them unset or zero.
// Hugepages never do: they are never overcommitted, so a container that requests them sets the limit.
var defaultedLimits = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

// VolumeResourceValue is the content of a downwardAPI volume file, or of a projected volume's
// downwardAPI item, whose source is ref: the request or limit of the container ref.ContainerName names
// (a regular or an init container, sidecars included), divided by the divisor and rounded up. A cpu,
// memory or ephemeral-storage limit that container leaves unset or zero reads as the node's allocatable
// (nil: none known). Pod-level limits play no part: the kubelet's volume plugins ignore them, unlike its
// environment variables (EnvResourceValue).
func VolumeResourceValue(pod *corev1.Pod, ref *corev1.ResourceFieldSelector, nodeAllocatable corev1.ResourceList) (string, error) {
	c, kind := FindContainer(pod, ref.ContainerName)
	if kind != RegularContainer && kind != InitContainer {
		return "", containerNotFound(ref.ContainerName)
	}
	return containerResourceValue(ref, c, nodeAllocatable)
}

// EnvResourceValue is the value of an environment variable of container c (regular, init or ephemeral)
// whose source is ref, as the kubelet resolves it: the request or limit of c itself, or of the container
// ref.ContainerName names (regular or init), divided by the divisor and rounded up. A cpu, memory or
// ephemeral-storage limit left unset or zero reads as the pod-level limit where the pod sets one, else as
// the node's allocatable (nil: none known) — for c and for a regular container named by containerName,
// but not for an init container named by containerName: its unset limits read as 0, because the kubelet
// defaults only c and the regular containers.
func EnvResourceValue(pod *corev1.Pod, c *corev1.Container, ref *corev1.ResourceFieldSelector, nodeAllocatable corev1.ResourceList) (string, error) {
	defaults := envLimitDefaults(pod, nodeAllocatable)
	if ref.ContainerName == "" {
		return containerResourceValue(ref, c, defaults)
	}
	named, kind := FindContainer(pod, ref.ContainerName)
	switch kind {
	case RegularContainer:
		return containerResourceValue(ref, named, defaults)
	case InitContainer:
		return containerResourceValue(ref, named, nil)
	}
	return "", containerNotFound(ref.ContainerName)
}

func containerNotFound(name string) error {
	return fmt.Errorf("container %s not found", name)
}

// envLimitDefaults is the node's allocatable with the pod-level cpu and memory limits in its place
// where the pod sets them (non-zero) and the node reports the resource.
func envLimitDefaults(pod *corev1.Pod, nodeAllocatable corev1.ResourceList) corev1.ResourceList {
	if !PodLevelLimitsSet(pod) {
		return nodeAllocatable
	}
	out := nodeAllocatable.DeepCopy()
	for _, name := range defaultedLimits {
		if !IsSupportedPodLevelResource(name) {
			continue
		}
		if v, ok := pod.Spec.Resources.Limits[name]; ok && !v.IsZero() {
			if _, known := out[name]; known {
				out[name] = v.DeepCopy()
			}
		}
	}
	return out
}

// IsSupportedPodLevelResource says whether a resource may be set in the pod's spec.resources: cpu,
// memory and hugepages-<size>.
func IsSupportedPodLevelResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory || isHugePages(name)
}

func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// containerResourceValue renders ref's resource of c in units of the divisor, rounded up; defaults
// stand in for the limits in defaultedLimits that c leaves unset or zero.
func containerResourceValue(ref *corev1.ResourceFieldSelector, c *corev1.Container, defaults corev1.ResourceList) (string, error) {
	name, q, ok := selectedQuantity(ref.Resource, &c.Resources, defaults)
	if !ok {
		return "", fmt.Errorf("unsupported container resource : %v", ref.Resource)
	}
	return strconv.FormatInt(divideRoundingUp(name, q, divisorOf(ref)), 10), nil
}

// selectedQuantity resolves "requests.<name>" or "limits.<name>" for cpu, memory, ephemeral-storage
// and hugepages-<size>; a resource the container does not set is 0. ok is false for anything else.
func selectedQuantity(sel string, r *corev1.ResourceRequirements, defaults corev1.ResourceList) (corev1.ResourceName, resource.Quantity, bool) {
	kind, rest, _ := strings.Cut(sel, ".")
	name := corev1.ResourceName(rest)
	if !isDownwardAPIResource(name) {
		return "", resource.Quantity{}, false
	}
	switch kind {
	case "requests":
		return name, r.Requests[name], true
	case "limits":
		return name, limitOrDefault(r.Limits, name, defaults), true
	}
	return "", resource.Quantity{}, false
}

// isDownwardAPIResource: the resources a resourceFieldRef may select.
func isDownwardAPIResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return true
	}
	return isHugePages(name)
}

// limitOrDefault is the limit of name, or its default when the limit is unset or zero and name is one
// of defaultedLimits.
func limitOrDefault(limits corev1.ResourceList, name corev1.ResourceName, defaults corev1.ResourceList) resource.Quantity {
	q, ok := limits[name]
	if (ok && !q.IsZero()) || !slices.Contains(defaultedLimits, name) {
		return q
	}
	if def, known := defaults[name]; known {
		return def
	}
	return q
}

// divisorOf is ref's divisor, 1 when unset (zero).
func divisorOf(ref *corev1.ResourceFieldSelector) resource.Quantity {
	if ref.Divisor.IsZero() {
		return resource.MustParse("1")
	}
	return ref.Divisor
}

// divideRoundingUp divides q by divisor and rounds up, in millis for cpu (so a divisor of 1m counts
// millicores) and in units for everything else.
func divideRoundingUp(name corev1.ResourceName, q, divisor resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))
	}
	return int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))
}
