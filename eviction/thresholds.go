package eviction

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/config"
)

// Threshold is one eviction threshold: the signal's available amount below Value (a quantity, or a
// fraction of the signal's capacity) meets it.
type Threshold struct {
	Signal string
	Value  config.Threshold
	// Hard thresholds act at once; a soft one only once met for GracePeriod.
	Hard        bool
	GracePeriod time.Duration
	// MinReclaim, when set, is how far beyond Value the signal must recover before the threshold stops
	// being met once it was.
	MinReclaim *config.Threshold
}

// key identifies a threshold across passes.
func (t Threshold) key() string {
	if t.Hard {
		return t.Signal + "/hard"
	}
	return t.Signal + "/soft"
}

// quantity is the threshold in the signal's unit for a signal of the given capacity.
func quantity(v config.Threshold, capacity int64) int64 {
	if v.Quantity != nil {
		return v.Quantity.Value()
	}
	return int64(float64(v.Percentage) * float64(capacity))
}

// String is the threshold as the kubelet logs it.
func (t Threshold) String() string {
	return fmt.Sprintf("threshold(signal=%s, quantity=%s, gracePeriod=%s)", t.Signal, formatValue(t.Value), t.GracePeriod)
}

func formatValue(v config.Threshold) string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return strconv.FormatFloat(v.Percentage*100, 'f', -1, 64) + "%"
}

// Thresholds are the kubelet's eviction thresholds from its configuration: evictionHard, evictionSoft
// with evictionSoftGracePeriod, evictionMinimumReclaim, and — when enforceNodeAllocatable includes "pods" —
// an allocatableMemory.available threshold copied from the hard memory.available one.
func Thresholds(kc *kubeletconfigv1beta1.KubeletConfiguration) ([]Threshold, error) {
	hard, err := config.ParseThresholds(kc.EvictionHard)
	if err != nil {
		return nil, fmt.Errorf("evictionHard: %w", err)
	}
	soft, err := config.ParseThresholds(kc.EvictionSoft)
	if err != nil {
		return nil, fmt.Errorf("evictionSoft: %w", err)
	}
	minReclaim, err := parseMinimumReclaims(kc.EvictionMinimumReclaim)
	if err != nil {
		return nil, err
	}
	var out []Threshold
	for _, h := range hard {
		out = append(out, Threshold{Signal: h.Signal, Value: h, Hard: true})
	}
	for _, s := range soft {
		v, ok := kc.EvictionSoftGracePeriod[s.Signal]
		if !ok {
			return nil, fmt.Errorf("grace period must be specified for the soft eviction threshold %v", s.Signal)
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("evictionSoftGracePeriod %s: invalid duration %q", s.Signal, v)
		}
		out = append(out, Threshold{Signal: s.Signal, Value: s, GracePeriod: d})
	}
	for i := range out {
		if m, ok := minReclaim[out[i].Signal]; ok {
			out[i].MinReclaim = &m
		}
	}
	if slices.Contains(kc.EnforceNodeAllocatable, "pods") {
		for _, t := range out {
			if t.Hard && t.Signal == config.SignalMemoryAvailable {
				out = append(out, Threshold{Signal: config.SignalAllocatableMemoryAvailable, Value: t.Value, Hard: true, MinReclaim: t.MinReclaim})
				break
			}
		}
	}
	return out, nil
}

// parseMinimumReclaims parses evictionMinimumReclaim: a non-negative quantity or a positive percentage per
// signal.
func parseMinimumReclaims(m map[string]string) (map[string]config.Threshold, error) {
	out := map[string]config.Threshold{}
	for _, signal := range slices.Sorted(maps.Keys(m)) {
		val := m[signal]
		if _, ok := signalResource[signal]; !ok {
			return nil, fmt.Errorf("evictionMinimumReclaim: unsupported eviction signal %v", signal)
		}
		if p, ok := strings.CutSuffix(val, "%"); ok {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil || f <= 0 || f > 100 {
				return nil, fmt.Errorf("evictionMinimumReclaim: eviction percentage minimum reclaim %v must be positive: %s", signal, val)
			}
			out[signal] = config.Threshold{Signal: signal, Percentage: f / 100}
			continue
		}
		q, err := resource.ParseQuantity(val)
		if err != nil {
			return nil, fmt.Errorf("evictionMinimumReclaim %s: %w", signal, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("evictionMinimumReclaim: negative eviction minimum reclaim specified for %v", signal)
		}
		out[signal] = config.Threshold{Signal: signal, Quantity: &q}
	}
	return out, nil
}

// Resources the kubelet reclaims that are not API resource names.
const (
	resourceInodes corev1.ResourceName = "inodes"
	resourcePids   corev1.ResourceName = "pids"
)

// signalResource is the resource each signal measures (the kubelet's signalToResource).
var signalResource = map[string]corev1.ResourceName{
	config.SignalMemoryAvailable:            corev1.ResourceMemory,
	config.SignalAllocatableMemoryAvailable: corev1.ResourceMemory,
	config.SignalNodeFsAvailable:            corev1.ResourceEphemeralStorage,
	config.SignalImageFsAvailable:           corev1.ResourceEphemeralStorage,
	config.SignalContainerFsAvailable:       corev1.ResourceEphemeralStorage,
	config.SignalNodeFsInodesFree:           resourceInodes,
	config.SignalImageFsInodesFree:          resourceInodes,
	config.SignalContainerFsInodesFree:      resourceInodes,
	config.SignalPIDAvailable:               resourcePids,
}

// signalCondition is the node condition a met threshold of each signal reports.
var signalCondition = map[string]corev1.NodeConditionType{
	config.SignalMemoryAvailable:            corev1.NodeMemoryPressure,
	config.SignalAllocatableMemoryAvailable: corev1.NodeMemoryPressure,
	config.SignalNodeFsAvailable:            corev1.NodeDiskPressure,
	config.SignalImageFsAvailable:           corev1.NodeDiskPressure,
	config.SignalContainerFsAvailable:       corev1.NodeDiskPressure,
	config.SignalNodeFsInodesFree:           corev1.NodeDiskPressure,
	config.SignalImageFsInodesFree:          corev1.NodeDiskPressure,
	config.SignalContainerFsInodesFree:      corev1.NodeDiskPressure,
	config.SignalPIDAvailable:               corev1.NodePIDPressure,
}

func isMemorySignal(s string) bool {
	return s == config.SignalMemoryAvailable || s == config.SignalAllocatableMemoryAvailable
}
