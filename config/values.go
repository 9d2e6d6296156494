package config

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// pflag.Value implementations that write into the bound field only on Set,
// so absent flags never overwrite values loaded from the config file.

// boolPtrValue binds a *bool field; "--flag" alone means true.
type boolPtrValue struct{ p **bool }

func (v *boolPtrValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*v.p = &b
	return nil
}

func (v *boolPtrValue) String() string {
	if *v.p == nil {
		return ""
	}
	return strconv.FormatBool(**v.p)
}

func (v *boolPtrValue) Type() string { return "bool" }

// int32PtrValue binds a *int32 field.
type int32PtrValue struct{ p **int32 }

func (v *int32PtrValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 32)
	if err != nil {
		return err
	}
	i := int32(n)
	*v.p = &i
	return nil
}

func (v *int32PtrValue) String() string {
	if *v.p == nil {
		return ""
	}
	return strconv.Itoa(int(**v.p))
}

func (v *int32PtrValue) Type() string { return "int32" }

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
// maps to "".
type mapValue struct {
	p     *map[string]string
	sep   string
	merge bool
	set   bool
}

func (v *mapValue) Set(s string) error {
	if (!v.merge && !v.set) || *v.p == nil {
		*v.p = map[string]string{}
	}
	v.set = true
	for _, pair := range strings.Split(s, ",") {
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
