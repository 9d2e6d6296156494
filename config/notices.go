package config

import (
	"encoding/json"
	"reflect"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Notice is one thing start-up reports once: a setting or flag nodelet accepts but does not act on, or a
// config file decoded leniently. Msg is a constant message; KeysAndValues are its structured details.
type Notice struct {
	Msg           string
	KeysAndValues []any
}

// Notice messages.
const (
	MsgLenientDecoding = "Using lenient decoding as strict decoding failed"
	MsgFieldNoEffect   = "Setting has no effect on nodelet"
	MsgFlagNoEffect    = "Flag has no effect on nodelet"
	MsgFlagDeprecated  = "Flag has been deprecated"
	MsgFeatureGates    = "Feature gates recorded"
)

// LogNotices logs each notice once, at info level.
func (c *Config) LogNotices(log logr.Logger) {
	for _, n := range c.Notices {
		log.Info(n.Msg, n.KeysAndValues...)
	}
}

// implementedFields are the KubeletConfiguration fields (JSON paths) nodelet acts on, whatever their value; a
// path covers the fields under it. featureGates are recorded (and steer defaulting) rather than implemented one
// by one: they get their own notice. Every other field is reported at start (fieldNotices); docs/config.md lists
// them.
var implementedFields = map[string]bool{
	"apiVersion": true, "kind": true,
	"address": true, "port": true, "tlsCertFile": true, "tlsPrivateKeyFile": true,
	"authentication": true, "authorization": true, "healthzPort": true, "healthzBindAddress": true,
	"staticPodPath": true, "staticPodURL": true, "staticPodURLHeader": true,
	"syncFrequency": true, "fileCheckFrequency": true, "httpCheckFrequency": true,
	"clusterDNS": true, "clusterDomain": true, "resolvConf": true,
	"podLogsDir": true, "containerLogMaxSize": true, "containerLogMaxFiles": true,
	"containerRuntimeEndpoint": true, "imageServiceEndpoint": true, "runtimeRequestTimeout": true,
	"maxParallelImagePulls": true, "serializeImagePulls": true,
	"cgroupDriver": true, "cgroupRoot": true, "cgroupsPerQOS": true, "failCgroupV1": true,
	"nodeStatusUpdateFrequency": true, "nodeStatusReportFrequency": true, "nodeLeaseDurationSeconds": true,
	"nodeStatusMaxImages": true, "registerWithTaints": true, "providerID": true,
	"maxPods": true, "systemReserved": true, "kubeReserved": true, "enforceNodeAllocatable": true,
	// The eviction manager.
	"evictionHard": true, "mergeDefaultEvictionSettings": true, "evictionPressureTransitionPeriod": true,
	"evictionSoft": true, "evictionSoftGracePeriod": true, "evictionMaxPodGracePeriod": true,
	"evictionMinimumReclaim": true, "kernelMemcgNotification": true, "localStorageCapacityIsolation": true,
	"kubeAPIQPS": true, "kubeAPIBurst": true,
	"shutdownGracePeriod": true, "shutdownGracePeriodCriticalPods": true, "shutdownGracePeriodByPodPriority": true,
	"featureGates":      true,
	"logging.verbosity": true,
	// The node API and pod hardening.
	"enableServer": true, "readOnlyPort": true, "enableDebuggingHandlers": true,
	"enableProfilingHandler": true, "enableContentionProfiling": true,
	"enableSystemLogHandler": true, "enableSystemLogQuery": true, "tracing": true,
	"tlsMinVersion": true, "tlsCipherSuites": true, "tlsCurvePreferences": true,
	"allowedUnsafeSysctls": true, "seccompDefault": true, "podPidsLimit": true, "protectKernelDefaults": true,
	"imagePullCredentialsVerificationPolicy": true, "preloadedImagesVerificationAllowlist": true,
	// Memory: swap and OOM kills.
	"failSwapOn": true, "memorySwap": true, "singleProcessOOMKill": true,
	// Pods' user namespaces (package userns).
	"userNamespaces": true,
	// Image garbage collection.
	"imageGCHighThresholdPercent": true, "imageGCLowThresholdPercent": true,
	"imageMinimumGCAge": true, "imageMaximumGCAge": true,
	// Node credentials: client certificate rotation and the serving certificate (package nodecreds).
	"rotateCertificates": true, "serverTLSBootstrap": true,
}

// defaultOnlyFields are the fields whose kubelet default is exactly what nodelet always does — most turn off a
// feature nodelet does not have. At the default they promise nothing nodelet leaves unkept, so only another
// value is reported.
var defaultOnlyFields = map[string]bool{
	"registerNode": true, "runOnce": true, "podCIDR": true, "podsPerCore": true,
	"cpuCFSQuota": true, "cpuCFSQuotaPeriod": true, "crashLoopBackOff": true, "hairpinMode": true,
	"enableControllerAttachDetach": true,
	"showHiddenMetricsForVersion":  true,
	"kubeletCgroups":               true, "systemCgroups": true, "systemReservedCgroup": true, "kubeReservedCgroup": true,
	"reservedSystemCPUs": true, "reservedMemory": true, "qosReserved": true, "defaultPodSysctls": true,
	"memoryThrottlingFactor": true, "memoryReservationPolicy": true,
	"logging": true,
}

// partialFields are struct fields of which nodelet implements only some sub-fields: their sub-fields are
// checked one by one.
var partialFields = map[string]bool{"logging": true}

// implemented reports whether path, or a field above it, is implemented.
func implemented(path string) bool {
	for p := path; ; {
		if implementedFields[p] {
			return true
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// docNotices are the lenient-decoding warnings of the files read.
func docNotices(docs []configDoc) []Notice {
	var out []Notice
	for _, d := range docs {
		for _, w := range d.warnings {
			out = append(out, Notice{Msg: MsgLenientDecoding, KeysAndValues: []any{"file", d.path, "err", w}})
		}
	}
	return out
}

// flagNotices reports each given flag that nodelet does not act on, and returns the fields those flags
// set (already reported, so the field check skips them).
func flagNotices(fs *pflag.FlagSet, c *Config) ([]Notice, map[string]bool) {
	var out []Notice
	reported := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) {
		kv := []any{"flag", "--" + f.Name, "value", f.Value.String()}
		switch {
		case f.Deprecated != "":
			out = append(out, Notice{Msg: MsgFlagDeprecated, KeysAndValues: append(kv, "reason", f.Deprecated)})
		case len(f.Annotations[annNoEffect]) > 0:
			out = append(out, Notice{Msg: MsgFlagNoEffect, KeysAndValues: append(kv, "reason", f.Annotations[annNoEffect][0])})
		case len(f.Annotations[annField]) > 0 && !implemented(f.Annotations[annField][0]):
			path := f.Annotations[annField][0]
			reported[path] = true
			out = append(out, Notice{Msg: MsgFlagNoEffect, KeysAndValues: append(kv, "field", path)})
		case f.Name == "cloud-provider" && c.CloudProvider == cloudProviderExternal:
			out = append(out, Notice{Msg: MsgFlagNoEffect, KeysAndValues: append(kv,
				"reason", "nodelet does not taint the node for the external cloud controller manager")})
		}
	})
	return out, reported
}

// fieldNotices reports each KubeletConfiguration field nodelet does not act on, with its effective value: every
// one that holds a value, whatever it is, except a defaultOnly field at the kubelet's default. Fields already
// reported for a flag are skipped.
func fieldNotices(kc *kubeletconfigv1beta1.KubeletConfiguration, docs []configDoc, reported map[string]bool) ([]Notice, error) {
	effective, err := toFields(kc)
	if err != nil {
		return nil, err
	}
	var defaults kubeletconfigv1beta1.KubeletConfiguration
	SetDefaults(&defaults)
	defaultFields, err := toFields(&defaults)
	if err != nil {
		return nil, err
	}
	var out []Notice
	for _, path := range fieldPaths(docs) {
		if implemented(path) || reported[path] {
			continue
		}
		got, def := lookup(effective, path), lookup(defaultFields, path)
		if got == nil || defaultOnly(path) && reflect.DeepEqual(got, def) {
			continue // unset and without a default: nothing is promised
		}
		out = append(out, Notice{Msg: MsgFieldNoEffect, KeysAndValues: []any{"field", path, "value", compactJSON(got)}})
	}
	if len(kc.FeatureGates) > 0 {
		out = append(out, Notice{Msg: MsgFeatureGates, KeysAndValues: []any{"featureGates", kc.FeatureGates}})
	}
	return out, nil
}

// defaultOnly reports whether path, or a field above it, is a defaultOnlyFields entry.
func defaultOnly(path string) bool {
	name, _, _ := strings.Cut(path, ".")
	return defaultOnlyFields[name]
}

// fieldPaths lists, sorted, every top-level KubeletConfiguration field and the sub-fields the documents set
// of partially implemented fields.
func fieldPaths(docs []configDoc) []string {
	seen := map[string]bool{}
	for _, name := range kubeletFieldNames() {
		if !partialFields[name] {
			seen[name] = true
		}
	}
	for _, p := range setPaths(docs) {
		seen[p] = true
	}
	return sortedKeys(seen)
}

// kubeletFieldNames are the JSON names of KubeletConfiguration's fields.
func kubeletFieldNames() []string {
	var out []string
	t := reflect.TypeFor[kubeletconfigv1beta1.KubeletConfiguration]()
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && !f.Anonymous {
			out = append(out, name)
		}
	}
	return out
}

// setPaths lists, sorted, the fields the documents set: top-level names, and the sub-fields of partially
// implemented fields.
func setPaths(docs []configDoc) []string {
	seen := map[string]bool{}
	for _, d := range docs {
		for name, v := range d.fields {
			sub, ok := v.(map[string]any)
			if !partialFields[name] || !ok {
				seen[name] = true
				continue
			}
			for subName := range sub {
				seen[name+"."+subName] = true
			}
		}
	}
	return sortedKeys(seen)
}

// lookup returns the value at a dotted path of a JSON object, or nil.
func lookup(fields map[string]any, path string) any {
	var v any = fields
	for _, name := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[name]
	}
	return v
}

func compactJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(data)
}
