package config

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// pflag.Value implementations that write into the bound field only on Set,
// so absent flags never overwrite values loaded from the config file.

// ptrValue binds a pointer field (*bool, *int32, *string, ...): Set parses the value and points the
// field at it.
type ptrValue[T any] struct {
	p     **T
	parse func(string) (T, error)
	typ   string
}

func (v *ptrValue[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return err
	}
	*v.p = &x
	return nil
}

func (v *ptrValue[T]) String() string {
	if *v.p == nil {
		return ""
	}
	return fmt.Sprint(**v.p)
}

func (v *ptrValue[T]) Type() string { return v.typ }

func parseInt32(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 0, 32)
	return int32(n), err
}

func parseInt64(s string) (int64, error) { return strconv.ParseInt(s, 0, 64) }

func parseString(s string) (string, error) { return s, nil }

func parseDuration(s string) (metav1.Duration, error) {
	d, err := time.ParseDuration(s)
	return metav1.Duration{Duration: d}, err
}

// trueOnlyValue binds --seccomp-default: the kubelet ORs the flag with the config file, so only "true"
// writes.
type trueOnlyValue struct{ p **bool }

func (v *trueOnlyValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	if b {
		t := true
		*v.p = &t
	}
	return nil
}

func (v *trueOnlyValue) String() string {
	return strconv.FormatBool(*v.p != nil && **v.p)
}

func (v *trueOnlyValue) Type() string { return "bool" }

// ipStringValue binds a string field that must hold an IP address.
type ipStringValue struct{ p *string }

func (v *ipStringValue) Set(s string) error {
	if net.ParseIP(strings.TrimSpace(s)) == nil {
		return fmt.Errorf("%q is not a valid IP address", s)
	}
	*v.p = strings.TrimSpace(s)
	return nil
}

func (v *ipStringValue) String() string { return *v.p }
func (v *ipStringValue) Type() string   { return "ip" }

// mapValue binds a map[string]string given as "k<sep>v,k2<sep>v2". Unless
// merge is set, the first Set replaces the map (the kubelet's
// MapStringString); later repetitions of the flag add to it. With merge (the
// kubelet's ConfigurationMap, used for --node-labels) a key without a value
// maps to "". With noSplit each Set is a single pair whose value may hold
// commas (MapStringStringNoSplit).
type mapValue struct {
	p       *map[string]string
	sep     string
	merge   bool
	noSplit bool
	set     bool
}

func (v *mapValue) Set(s string) error {
	if (!v.merge && !v.set) || *v.p == nil {
		*v.p = map[string]string{}
	}
	v.set = true
	pairs := []string{s}
	if !v.noSplit {
		pairs = strings.Split(s, ",")
	}
	for _, pair := range pairs {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		if err := v.setPair(pair); err != nil {
			return err
		}
	}
	return nil
}

func (v *mapValue) setPair(pair string) error {
	key, val, ok := strings.Cut(pair, v.sep)
	if !ok && !v.merge {
		return fmt.Errorf("malformed pair %q, expect key%svalue", pair, v.sep)
	}
	(*v.p)[strings.TrimSpace(key)] = strings.TrimSpace(val)
	return nil
}

func (v *mapValue) String() string {
	pairs := make([]string, 0, len(*v.p))
	for _, k := range sortedKeys(*v.p) {
		pairs = append(pairs, k+v.sep+(*v.p)[k])
	}
	return strings.Join(pairs, ",")
}

func (v *mapValue) Type() string { return "mapStringString" }

// multimapValue binds --manifest-url-header: "name:value,name2:value2";
// the first Set replaces the map, repeated names accumulate values.
type multimapValue struct {
	p   *map[string][]string
	set bool
}

func (v *multimapValue) Set(s string) error {
	if !v.set || *v.p == nil {
		*v.p = map[string][]string{}
	}
	v.set = true
	for _, pair := range strings.Split(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		key, val, ok := strings.Cut(pair, ":")
		if !ok {
			return fmt.Errorf("malformed pair %q, expect name:value", pair)
		}
		key = strings.TrimSpace(key)
		(*v.p)[key] = append((*v.p)[key], strings.TrimSpace(val))
	}
	return nil
}

func (v *multimapValue) String() string {
	var pairs []string
	for _, k := range sortedKeys(*v.p) {
		for _, val := range (*v.p)[k] {
			pairs = append(pairs, k+":"+val)
		}
	}
	return strings.Join(pairs, ",")
}

func (v *multimapValue) Type() string { return "colonSeparatedMultimapStringString" }

// taintsValue binds --register-with-taints; each Set replaces the list.
type taintsValue struct{ p *[]corev1.Taint }

func (v *taintsValue) Set(s string) error {
	var taints []corev1.Taint
	for _, spec := range strings.Split(s, ",") {
		if spec = strings.TrimSpace(spec); spec == "" {
			continue
		}
		t, err := ParseTaint(spec)
		if err != nil {
			return err
		}
		taints = append(taints, t)
	}
	*v.p = taints
	return nil
}

func (v *taintsValue) String() string {
	parts := make([]string, len(*v.p))
	for i, t := range *v.p {
		parts[i] = t.ToString()
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (v *taintsValue) Type() string { return "taints" }

// ParseTaint parses "key=value:Effect" or "key:Effect" (kubelet syntax).
// The key, value and effect are checked by Validate.
func ParseTaint(spec string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(spec, ":")
	if !ok || strings.Contains(effect, ":") {
		return corev1.Taint{}, fmt.Errorf("invalid taint spec %q, expect key=value:Effect or key:Effect", spec)
	}
	key, value, _ := strings.Cut(kv, "=")
	if strings.Contains(value, "=") {
		return corev1.Taint{}, fmt.Errorf("invalid taint spec %q, expect key=value:Effect or key:Effect", spec)
	}
	t := corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}
	if errs := validateTaint(t, field.NewPath("taint")); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("invalid taint spec %q: %w", spec, errs.ToAggregate())
	}
	return t, nil
}

// featureGatesValue binds --feature-gates ("Name=true,Other=false"). Gates
// from the flag are added to those of the config file, the flag winning for a
// gate named in both, as the kubelet does.
type featureGatesValue struct{ p *map[string]bool }

func (v *featureGatesValue) Set(s string) error {
	if *v.p == nil {
		*v.p = map[string]bool{}
	}
	for _, pair := range strings.Split(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		name, val, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("missing bool value for %s", pair)
		}
		b, err := strconv.ParseBool(strings.TrimSpace(val))
		if err != nil {
			return fmt.Errorf("invalid value of %s: %s: %w", name, val, err)
		}
		(*v.p)[strings.TrimSpace(name)] = b
	}
	return nil
}

func (v *featureGatesValue) String() string {
	pairs := make([]string, 0, len(*v.p))
	for _, k := range sortedKeys(*v.p) {
		pairs = append(pairs, k+"="+strconv.FormatBool((*v.p)[k]))
	}
	return strings.Join(pairs, ",")
}

func (v *featureGatesValue) Type() string { return "mapStringBool" }

// reservedMemoryValue binds --reserved-memory ("0:memory=1Gi,hugepages-1M=2Gi",
// one NUMA node per flag); the first Set replaces the list, later ones add.
type reservedMemoryValue struct {
	p   *[]kubeletconfigv1beta1.MemoryReservation
	set bool
}

func (v *reservedMemoryValue) Set(s string) error {
	if !v.set {
		*v.p = nil
		v.set = true
	}
	node, limits, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return fmt.Errorf("invalid reserved memory %q, expect <numa-node>:<type>=<quantity>[,...]", s)
	}
	numa, err := strconv.ParseInt(strings.TrimSpace(node), 10, 32)
	if err != nil {
		return fmt.Errorf("invalid NUMA node %q: %w", node, err)
	}
	r := kubeletconfigv1beta1.MemoryReservation{NumaNode: int32(numa), Limits: corev1.ResourceList{}}
	for _, pair := range strings.Split(limits, ",") {
		name, qty, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return fmt.Errorf("invalid reserved memory limit %q, expect <type>=<quantity>", pair)
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(qty))
		if err != nil {
			return fmt.Errorf("invalid quantity for %s: %w", name, err)
		}
		rn := corev1.ResourceName(strings.TrimSpace(name))
		if _, dup := r.Limits[rn]; dup {
			return fmt.Errorf("duplicate reserved memory type %s for NUMA node %d", rn, numa)
		}
		r.Limits[rn] = q
	}
	*v.p = append(*v.p, r)
	return nil
}

func (v *reservedMemoryValue) String() string {
	parts := make([]string, 0, len(*v.p))
	for _, r := range *v.p {
		limits := make([]string, 0, len(r.Limits))
		for name, q := range r.Limits {
			limits = append(limits, string(name)+"="+q.String())
		}
		sort.Strings(limits)
		parts = append(parts, fmt.Sprintf("%d:%s", r.NumaNode, strings.Join(limits, ",")))
	}
	return strings.Join(parts, " ")
}

func (v *reservedMemoryValue) Type() string { return "reservedMemory" }

// removedValue stands for a flag the kubelet no longer has: kubelet v1.37
// fails on it, and so does nodelet, saying why.
type removedValue struct{ why string }

func (v removedValue) Set(string) error { return errors.New(v.why) }
func (v removedValue) String() string   { return "" }
func (v removedValue) Type() string     { return "removed" }

// versionValue binds --version: "true" or "raw" asks for the version, "false"
// does not.
type versionValue struct{ p *bool }

func (v versionValue) Set(s string) error {
	if s == "raw" {
		*v.p = true
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("invalid value %q: want true, false or raw", s)
	}
	*v.p = b
	return nil
}

func (v versionValue) String() string { return strconv.FormatBool(*v.p) }
func (v versionValue) Type() string   { return "version" }
