package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Eviction signals the kubelet accepts in evictionHard / evictionSoft.
const (
	SignalMemoryAvailable       = "memory.available"
	SignalNodeFsAvailable       = "nodefs.available"
	SignalNodeFsInodesFree      = "nodefs.inodesFree"
	SignalImageFsAvailable      = "imagefs.available"
	SignalImageFsInodesFree     = "imagefs.inodesFree"
	SignalContainerFsAvailable  = "containerfs.available"
	SignalContainerFsInodesFree = "containerfs.inodesFree"
	SignalPIDAvailable          = "pid.available"
	// SignalAllocatableMemoryAvailable is accepted by the kubelet as well.
	SignalAllocatableMemoryAvailable = "allocatableMemory.available"
)

var knownSignals = map[string]bool{
	SignalMemoryAvailable:            true,
	SignalNodeFsAvailable:            true,
	SignalNodeFsInodesFree:           true,
	SignalImageFsAvailable:           true,
	SignalImageFsInodesFree:          true,
	SignalContainerFsAvailable:       true,
	SignalContainerFsInodesFree:      true,
	SignalPIDAvailable:               true,
	SignalAllocatableMemoryAvailable: true,
}

// Threshold is one parsed eviction threshold: exactly one of Quantity
// (absolute) or Percentage (fraction of capacity in 0..1) is meaningful.
type Threshold struct {
	Signal     string
	Quantity   *resource.Quantity
	Percentage float64
}

// ParseThresholds parses an evictionHard/evictionSoft map, sorted by signal.
// Like the kubelet, "0%" and "100%" thresholds are dropped (they disable the
// signal).
func ParseThresholds(m map[string]string) ([]Threshold, error) {
	var out []Threshold
	for _, signal := range sortedKeys(m) {
		t, err := parseThreshold(signal, m[signal])
		if err != nil {
			return nil, fmt.Errorf("eviction threshold %s: %w", signal, err)
		}
		if t != nil {
			out = append(out, *t)
		}
	}
	return out, nil
}

// parseThreshold returns nil, nil for a threshold the kubelet ignores.
func parseThreshold(signal, val string) (*Threshold, error) {
	if !knownSignals[signal] {
		return nil, fmt.Errorf("unsupported eviction signal %q", signal)
	}
	if strings.HasSuffix(val, "%") {
		return parsePercentThreshold(signal, val)
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return nil, fmt.Errorf("%q is neither a quantity nor a percentage: %w", val, err)
	}
	if q.Sign() <= 0 {
		return nil, fmt.Errorf("quantity %q must be positive", val)
	}
	return &Threshold{Signal: signal, Quantity: &q}, nil
}

func parsePercentThreshold(signal, val string) (*Threshold, error) {
	if val == "0%" || val == "100%" {
		return nil, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 64)
	if err != nil {
		return nil, fmt.Errorf("invalid percentage %q: %w", val, err)
	}
	if f < 0 || f > 100 {
		return nil, fmt.Errorf("percentage %q must be between 0%% and 100%%", val)
	}
	return &Threshold{Signal: signal, Percentage: f / 100}, nil
}

// reservableResources are the resources systemReserved/kubeReserved accept.
var reservableResources = map[corev1.ResourceName]bool{
	corev1.ResourceCPU:              true,
	corev1.ResourceMemory:           true,
	corev1.ResourceEphemeralStorage: true,
	"pid":                           true,
}

// ParseResourceList parses a systemReserved/kubeReserved map the way the
// kubelet does (cpu rounded to millicores, negatives rejected).
func ParseResourceList(m map[string]string) (corev1.ResourceList, error) {
	rl := corev1.ResourceList{}
	for _, k := range sortedKeys(m) {
		q, err := parseReserved(k, m[k])
		if err != nil {
			return nil, err
		}
		rl[corev1.ResourceName(k)] = q
	}
	return rl, nil
}

func parseReserved(name, val string) (resource.Quantity, error) {
	if !reservableResources[corev1.ResourceName(name)] {
		return resource.Quantity{}, fmt.Errorf("cannot reserve %q resource", name)
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("quantity %q for %q: %w", val, name, err)
	}
	if q.Sign() < 0 {
		return resource.Quantity{}, fmt.Errorf("quantity for %q cannot be negative: %s", name, val)
	}
	if name == string(corev1.ResourceCPU) {
		q.SetMilli((q.ScaledValue(resource.Micro) + 500) / 1000)
	}
	return q, nil
}

// Reserved returns systemReserved + kubeReserved, summed per resource.
func (c *Config) Reserved() (corev1.ResourceList, error) {
	sys, err := ParseResourceList(c.Kubelet.SystemReserved)
	if err != nil {
		return nil, fmt.Errorf("systemReserved: %w", err)
	}
	kube, err := ParseResourceList(c.Kubelet.KubeReserved)
	if err != nil {
		return nil, fmt.Errorf("kubeReserved: %w", err)
	}
	for name, q := range kube {
		sum := sys[name]
		sum.Add(q)
		sys[name] = sum
	}
	return sys, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
