package eviction

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// met returns the thresholds the observations meet, ignoring grace periods. With enforceMinReclaim a
// threshold stays met until the signal has recovered its minimum reclaim beyond it (the kubelet's
// thresholdsMet). A threshold whose signal was not observed is not met.
func met(thresholds []Threshold, obs observations, enforceMinReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range thresholds {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		q := quantity(t.Value, o.capacity)
		if enforceMinReclaim && t.MinReclaim != nil {
			q += quantity(*t.MinReclaim, o.capacity)
		}
		if o.available < q {
			out = append(out, t)
		}
	}
	return out
}

// merge adds the thresholds of b not in a.
func merge(a, b []Threshold) []Threshold {
	out := append([]Threshold(nil), a...)
	for _, t := range b {
		if !has(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func has(ts []Threshold, t Threshold) bool {
	for _, x := range ts {
		if x.key() == t.key() {
			return true
		}
	}
	return false
}

// firstObserved keeps, for each threshold met now, when it was first met in an unbroken run of passes.
func firstObserved(ts []Threshold, last map[string]time.Time, now time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(ts))
	for _, t := range ts {
		if at, ok := last[t.key()]; ok {
			out[t.key()] = at
		} else {
			out[t.key()] = now
		}
	}
	return out
}

// graceMet are the thresholds of ts met for at least their grace period.
func graceMet(ts []Threshold, firstAt map[string]time.Time, now time.Time) []Threshold {
	var out []Threshold
	for _, t := range ts {
		if now.Sub(firstAt[t.key()]) >= t.GracePeriod {
			out = append(out, t)
		}
	}
	return out
}

// conditionsOf are the node conditions the thresholds report.
func conditionsOf(ts []Threshold) []corev1.NodeConditionType {
	var out []corev1.NodeConditionType
	for _, t := range ts {
		if c, ok := signalCondition[t.Signal]; ok && !containsCondition(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func containsCondition(cs []corev1.NodeConditionType, c corev1.NodeConditionType) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// conditionsLastObserved records now for the conditions observed now and keeps the others' last time.
func conditionsLastObserved(cs []corev1.NodeConditionType, last map[corev1.NodeConditionType]time.Time, now time.Time) map[corev1.NodeConditionType]time.Time {
	out := make(map[corev1.NodeConditionType]time.Time, len(last)+len(cs))
	for c, at := range last {
		out[c] = at
	}
	for _, c := range cs {
		out[c] = now
	}
	return out
}

// conditionsWithin are the conditions last observed less than period ago: a condition stays reported for
// the pressure transition period after its signal recovered. Sorted for stable output.
func conditionsWithin(last map[corev1.NodeConditionType]time.Time, period time.Duration, now time.Time) []corev1.NodeConditionType {
	var out []corev1.NodeConditionType
	for c, at := range last {
		if now.Sub(at) < period {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// updatedStats are the thresholds whose signal was measured after the previous pass's measurement (a
// pass acts only on fresh figures).
func updatedStats(ts []Threshold, obs, last observations) []Threshold {
	var out []Threshold
	for _, t := range ts {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		l, seen := last[t.Signal]
		if !seen || o.time.IsZero() || o.time.After(l.time) {
			out = append(out, t)
		}
	}
	return out
}

// byEvictionPriority puts memory thresholds first and thresholds of signals without a resource to
// reclaim last (the kubelet's order).
func byEvictionPriority(ts []Threshold) {
	rank := func(t Threshold) int {
		switch _, ok := signalResource[t.Signal]; {
		case isMemorySignal(t.Signal):
			return 0
		case ok:
			return 1
		default:
			return 2
		}
	}
	sort.SliceStable(ts, func(i, j int) bool { return rank(ts[i]) < rank(ts[j]) })
}
