package podconfig

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The API server's limits on a pod's DNS config, which the kubelet also applies to the merged result.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	maxDNSSearchPathLen   = 253 // a DNS-1123 subdomain
	maxResolvConfSize     = 10 << 20
)

// defaultDNSOptions are the options of a ClusterFirst pod.
var defaultDNSOptions = []string{"ndots:5"}

type podDNSType int

const (
	podDNSCluster podDNSType = iota
	podDNSHost
	podDNSNone
)

// dnsType maps dnsPolicy: ClusterFirst of a host-network pod means Default; ClusterFirstWithHostNet means
// ClusterFirst; an unknown policy falls back to ClusterFirst.
func dnsType(pod *corev1.Pod) podDNSType {
	switch pod.Spec.DNSPolicy {
	case corev1.DNSNone:
		return podDNSNone
	case corev1.DNSDefault:
		return podDNSHost
	case corev1.DNSClusterFirst:
		if pod.Spec.HostNetwork {
			return podDNSHost
		}
	}
	return podDNSCluster
}

// MissingClusterDNS tells whether a ClusterFirst pod falls back to Default because the node has no
// clusterDNS: the kubelet records a MissingClusterDNS warning event on the pod then.
func MissingClusterDNS(pod *corev1.Pod, opts SandboxOptions) bool {
	return dnsType(pod) == podDNSCluster && len(opts.ClusterDNS) == 0
}

// PodDNSConfig is the DNS config of the pod's sandbox, like the kubelet's GetPodDNS. It is nil when the
// pod takes the host's DNS and no resolv.conf is configured: the runtime then copies the host's.
func PodDNSConfig(pod *corev1.Pod, opts SandboxOptions) (*runtimeapi.DNSConfig, error) {
	host, err := hostDNSConfig(opts.ResolvConf)
	if err != nil {
		return nil, err
	}
	var cfg *runtimeapi.DNSConfig
	switch dnsType(pod) {
	case podDNSNone:
		cfg = &runtimeapi.DNSConfig{}
	case podDNSCluster:
		if len(opts.ClusterDNS) > 0 {
			cfg = clusterFirstDNS(host, pod, opts)
			break
		}
		cfg = host // no clusterDNS: Default, as the kubelet falls back
	case podDNSHost:
		cfg = host
	}
	if pod.Spec.DNSConfig != nil {
		if cfg == nil {
			cfg = &runtimeapi.DNSConfig{}
		}
		mergePodDNSConfig(cfg, pod.Spec.DNSConfig)
	}
	if cfg == nil {
		return nil, nil
	}
	fitDNSLimits(cfg)
	return cfg, nil
}

// clusterFirstDNS: the cluster's nameservers, the cluster search domains followed by the host's, ndots:5.
func clusterFirstDNS(host *runtimeapi.DNSConfig, pod *corev1.Pod, opts SandboxOptions) *runtimeapi.DNSConfig {
	servers := make([]string, 0, len(opts.ClusterDNS))
	for _, s := range opts.ClusterDNS {
		if a, err := netip.ParseAddr(s); err == nil {
			s = a.String()
		}
		servers = append(servers, s)
	}
	searches := host.GetSearches()
	if opts.ClusterDomain != "" {
		d := opts.ClusterDomain
		searches = omitDuplicates(append([]string{pod.Namespace + ".svc." + d, "svc." + d, d}, searches...))
	}
	return &runtimeapi.DNSConfig{Servers: servers, Searches: searches, Options: slices.Clone(defaultDNSOptions)}
}

// hostDNSConfig reads the host's resolv.conf; nil without one.
func hostDNSConfig(path string) (*runtimeapi.DNSConfig, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open resolv.conf: %w", err)
	}
	defer func() { _ = f.Close() }()
	cfg, err := parseResolvConf(io.LimitReader(f, maxResolvConfSize))
	if err != nil {
		return nil, fmt.Errorf("parse resolv.conf %s: %w", path, err)
	}
	return cfg, nil
}

// parseResolvConf reads nameserver, search (the last line wins; "." and trailing dots dropped) and
// options lines (merged by option name).
func parseResolvConf(r io.Reader) (*runtimeapi.DNSConfig, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	cfg := &runtimeapi.DNSConfig{Servers: []string{}, Searches: []string{}, Options: []string{}}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) < 2 {
				return nil, fmt.Errorf("nameserver list is empty")
			}
			cfg.Servers = append(cfg.Servers, fields[1])
		case "search":
			cfg.Searches = searchDomains(fields[1:])
		case "options":
			cfg.Options = mergeOptions(cfg.Options, fields[1:])
		}
	}
	return cfg, nil
}

func searchDomains(fields []string) []string {
	s := []string{}
	for _, d := range fields {
		if d != "." {
			s = append(s, strings.TrimSuffix(d, "."))
		}
	}
	return s
}

// optionName is an option's name: "ndots" of "ndots:2".
func optionName(o string) string {
	name, _, _ := strings.Cut(o, ":")
	return name
}

// mergeOptions adds options, a later option replacing an earlier one of the same name in place.
func mergeOptions(options, add []string) []string {
	for _, o := range add {
		i := slices.IndexFunc(options, func(e string) bool { return optionName(e) == optionName(o) })
		if i >= 0 {
			options[i] = o
			continue
		}
		options = append(options, o)
	}
	return options
}

// mergePodDNSConfig applies spec.dnsConfig: nameservers and searches are appended (duplicates
// dropped), options merged by name (a pod option without value clears the value).
func mergePodDNSConfig(cfg *runtimeapi.DNSConfig, pod *corev1.PodDNSConfig) {
	cfg.Servers = omitDuplicates(append(cfg.Servers, pod.Nameservers...))
	cfg.Searches = omitDuplicates(append(cfg.Searches, pod.Searches...))
	add := make([]string, 0, len(pod.Options))
	for _, o := range pod.Options {
		if o.Value != nil && *o.Value != "" {
			add = append(add, o.Name+":"+*o.Value)
			continue
		}
		add = append(add, o.Name)
	}
	cfg.Options = mergeOptions(slices.Clone(cfg.Options), add)
}

func omitDuplicates(s []string) []string {
	seen := make(map[string]bool, len(s))
	out := make([]string, 0, len(s))
	for _, e := range s {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}

// fitDNSLimits keeps the first 3 nameservers, the first 32 search domains, drops domains longer than 253
// characters and then the last domains until the search line fits in 2048 characters. (The kubelet also
// records a DNSConfigForming warning event when it cuts.)
func fitDNSLimits(cfg *runtimeapi.DNSConfig) {
	if len(cfg.Servers) > maxDNSNameservers {
		cfg.Servers = cfg.Servers[:maxDNSNameservers]
	}
	searches := cfg.Searches
	if len(searches) > maxDNSSearchPaths {
		searches = searches[:maxDNSSearchPaths]
	}
	searches = slices.DeleteFunc(slices.Clone(searches), func(s string) bool { return len(s) > maxDNSSearchPathLen })
	for len(searches) > 0 && len(strings.Join(searches, " ")) > maxDNSSearchListChars {
		searches = searches[:len(searches)-1]
	}
	cfg.Searches = searches
}
