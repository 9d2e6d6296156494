package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Flag annotations: how a flag that nodelet accepts relates to what it does.
const (
	// annField names the KubeletConfiguration field (JSON path) a flag sets.
	annField = "nodelet.io/field"
	// annNoEffect says why a flag outside KubeletConfiguration has no effect on nodelet.
	annNoEffect = "nodelet.io/no-effect"
)

// NewFlagSet returns nodelet's flag set — every flag of the kubelet v1.37 on Linux, plus nodelet's own
// --metrics-bind-address — bound to c. Each flag writes into c only when it is given, so flags override
// whatever c already holds (the --config file and its drop-ins) and absent flags leave it alone. The
// defaults shown in usage are c's values at the time of the call. Flags the kubelet removed are rejected
// with the reason, as the kubelet rejects them.
func NewFlagSet(c *Config) *pflag.FlagSet {
	fs := pflag.NewFlagSet("nodelet", pflag.ContinueOnError)
	fs.SetNormalizeFunc(wordSepNormalize)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: nodelet [flags]\n\nnodelet is a Kubernetes node agent that accepts the kubelet's config file and flags.\n\nFlags:\n%s", fs.FlagUsages())
	}
	addGeneralFlags(fs, c)
	addNodeFlags(fs, c)
	addCredentialFlags(fs, c)
	addContainerGCFlags(fs, c)
	addNoEffectFlags(fs)
	addRemovedFlags(fs)
	addConfigFlags(fs, c)
	return fs
}

// wordSepNormalize accepts --foo_bar for --foo-bar, as the kubelet does.
func wordSepNormalize(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
}

func addGeneralFlags(fs *pflag.FlagSet, c *Config) {
	fs.StringVar(&c.ConfigFile, "config", c.ConfigFile, "Path to a KubeletConfiguration file (kubelet.config.k8s.io/v1beta1). Relative paths inside it are resolved against its directory. Flags override values from this file.")
	fs.StringVar(&c.ConfigDir, "config-dir", c.ConfigDir, "Directory of drop-in KubeletConfiguration files: every *.conf file in it and its subdirectories is merged over --config in lexical order. Flags override them.")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "Path to a kubeconfig file for the API server. Omit it to run in standalone mode.")
	fs.StringVar(&c.RootDir, "root-dir", c.RootDir, "Directory path for managing kubelet files (volume mounts, etc).")
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", c.MetricsBindAddress, "host:port of an unauthenticated listener serving the node's Prometheus metrics (the node API's authorized /metrics serves them by default); \"0\" (the default) runs none. Anyone who reaches the address reads the metrics: keep it on loopback of a host without hostNetwork pods.")
	fs.Var(versionValue{p: &c.PrintVersion}, "version", "Print the version (the Kubernetes release whose behaviour nodelet follows) and exit.")
	fs.Lookup("version").NoOptDefVal = "true"
}

func addNodeFlags(fs *pflag.FlagSet, c *Config) {
	fs.StringVar(&c.HostnameOverride, "hostname-override", c.HostnameOverride, "If non-empty, use this string as the node's name instead of the actual hostname.")
	fs.Var(&nodeIPValue{p: &c.NodeIPs}, "node-ip", "IP address (or comma-separated dual-stack pair of IP addresses) of the node.")
	fs.Var(&mapValue{p: &c.NodeLabels, sep: "=", merge: true}, "node-labels", "Labels to add when registering the node (key=value pairs separated by ','). Labels in the 'kubernetes.io' namespace must be in the set the kubelet may set on itself.")
	fs.StringVar(&c.CloudProvider, "cloud-provider", c.CloudProvider, "\"\" for no cloud provider or \"external\" (no effect on nodelet); in-tree providers are gone from the kubelet.")
}

// addCredentialFlags: the node's credentials and the lock file. They are recorded for the TLS bootstrap
// and lock file work; --cert-dir already holds the self-signed serving certificate.
func addCredentialFlags(fs *pflag.FlagSet, c *Config) {
	fs.StringVar(&c.BootstrapKubeconfig, "bootstrap-kubeconfig", c.BootstrapKubeconfig, "Path to a kubeconfig used to obtain the node's client certificate (a CSR) when --kubeconfig does not exist or holds no valid certificate; the new kubeconfig is written to --kubeconfig and the certificate to --cert-dir.")
	fs.StringVar(&c.CertDir, "cert-dir", c.CertDir, "Directory of the node's certificates; the self-signed serving certificate is kept here when --tls-cert-file is not set (default <root-dir>/pki).")
	fs.StringVar(&c.LockFile, "lock-file", c.LockFile, "Path of a lock file shared with other kubelets (or nodelets) on the node: held with flock while running.")
	fs.BoolVar(&c.ExitOnLockContention, "exit-on-lock-contention", c.ExitOnLockContention, "Exit when another process opens the lock file, so that it can take the node over.")
	fs.BoolVar(&c.LockContentionIgnoresKubelet, "lock-contention-ignores-kubelet", c.LockContentionIgnoresKubelet,
		"With --exit-on-lock-contention, do not exit when a kubelet opens the lock file (it waits for the lock, and takes the node back when nodelet exits); nodelet's own flag, set by `nodelet takeover`.")
}

// addNoEffectFlags accepts the kubelet's flags for features nodelet does not have; each one given is
// reported once at start-up.
func addNoEffectFlags(fs *pflag.FlagSet) {
	// Each flag keeps its own value (fs.String and the like), so that the start-up notice names what was given.
	fs.String("runtime-cgroups", "", "Cgroup to run the container runtime in (no effect on nodelet).")
	noEffect(fs, "runtime-cgroups", "nodelet does not manage the runtime's cgroup")
	fs.String("image-credential-provider-config", "", "Credential provider plugin config (no effect on nodelet).")
	noEffect(fs, "image-credential-provider-config", "nodelet has no image credential provider plugins")
	fs.String("image-credential-provider-bin-dir", "", "Credential provider plugin binaries (no effect on nodelet).")
	noEffect(fs, "image-credential-provider-bin-dir", "nodelet has no image credential provider plugins")
	fs.Duration("housekeeping-interval", 10*time.Second, "cAdvisor housekeeping interval (no effect on nodelet).")
	noEffect(fs, "housekeeping-interval", "nodelet has no cAdvisor")
	// Removed from the kubelet in v1.35, but kubeadm-flags.env files of clusters set up before that still carry
	// it: accepted (hidden) so that such a node can be handed over, and ignored as the sandbox image is the
	// runtime's setting.
	fs.String("pod-infra-container-image", "", "Removed from the kubelet in v1.35 (no effect on nodelet).")
	fs.Lookup("pod-infra-container-image").Hidden = true
	noEffect(fs, "pod-infra-container-image", "the sandbox image is configured in the container runtime (flag removed from the kubelet in v1.35)")
	const deprecated = "deprecated kubelet flag for a feature nodelet does not have"
	fs.String("experimental-mounter-path", "", "Deprecated in the kubelet (no effect on nodelet).")
	fs.Bool("experimental-allocatable-ignore-eviction", false, "Deprecated in the kubelet (no effect on nodelet).")
	for _, name := range []string{"experimental-mounter-path", "experimental-allocatable-ignore-eviction"} {
		noEffect(fs, name, deprecated)
	}
}

// containerGCDeprecation is the kubelet's deprecation message of the container garbage collection flags.
const containerGCDeprecation = "Use --eviction-hard or --eviction-soft instead. Will be removed in a future version."

// addContainerGCFlags: the container garbage collection policy, from the kubelet's deprecated (hidden from
// usage, reported at start-up) but still honoured flags, with the kubelet's defaults and usage.
func addContainerGCFlags(fs *pflag.FlagSet, c *Config) {
	fs.DurationVar(&c.MinimumGCAge, "minimum-container-ttl-duration", c.MinimumGCAge, "Minimum age for a finished container before it is garbage collected.  Examples: '300ms', '10s' or '2h45m'")
	fs.Int32Var(&c.MaxPerPodContainerCount, "maximum-dead-containers-per-container", c.MaxPerPodContainerCount, "Maximum number of old instances to retain per container.  Each container takes up some disk space.")
	fs.Int32Var(&c.MaxContainerCount, "maximum-dead-containers", c.MaxContainerCount, "Maximum number of old instances of containers to retain globally.  Each container takes up some disk space. To disable, set to a negative number.")
	for _, name := range []string{"minimum-container-ttl-duration", "maximum-dead-containers-per-container", "maximum-dead-containers"} {
		_ = fs.MarkDeprecated(name, containerGCDeprecation)
	}
}

// removedFlags are flags older kubelets had and kubelet v1.37 rejects, with the release that removed them.
var removedFlags = map[string]string{
	"container-runtime":                      "v1.27 (only remote CRI runtimes remain: use --container-runtime-endpoint)",
	"network-plugin":                         "v1.24 (networking is the CRI runtime's CNI configuration)",
	"network-plugin-mtu":                     "v1.24 (networking is the CRI runtime's CNI configuration)",
	"cni-bin-dir":                            "v1.24 (networking is the CRI runtime's CNI configuration)",
	"cni-conf-dir":                           "v1.24 (networking is the CRI runtime's CNI configuration)",
	"cni-cache-dir":                          "v1.24 (networking is the CRI runtime's CNI configuration)",
	"docker-endpoint":                        "v1.24 (dockershim was removed)",
	"image-pull-progress-deadline":           "v1.24 (dockershim was removed)",
	"experimental-dockershim-root-directory": "v1.24 (dockershim was removed)",
	"logtostderr":                            "v1.26 (klog flags were removed from Kubernetes components)",
	"alsologtostderr":                        "v1.26 (klog flags were removed from Kubernetes components)",
	"log-dir":                                "v1.26 (klog flags were removed from Kubernetes components)",
	"log-file":                               "v1.26 (klog flags were removed from Kubernetes components)",
	"log-file-max-size":                      "v1.26 (klog flags were removed from Kubernetes components)",
	"skip-headers":                           "v1.26 (klog flags were removed from Kubernetes components)",
	"skip-log-headers":                       "v1.26 (klog flags were removed from Kubernetes components)",
	"add-dir-header":                         "v1.26 (klog flags were removed from Kubernetes components)",
	"one-output":                             "v1.26 (klog flags were removed from Kubernetes components)",
	"stderrthreshold":                        "v1.26 (klog flags were removed from Kubernetes components)",
}

// addRemovedFlags registers the removed flags, hidden, so that using one fails with the reason rather than
// "unknown flag".
func addRemovedFlags(fs *pflag.FlagSet) {
	for name, when := range removedFlags {
		fs.Var(removedValue{why: "flag removed from the kubelet in " + when + "; kubelet v1.37 rejects it"}, name, "")
		f := fs.Lookup(name)
		f.Hidden = true
		f.NoOptDefVal = "true" // "--logtostderr" alone must reach Set too
	}
}

func noEffect(fs *pflag.FlagSet, name, why string) {
	_ = fs.SetAnnotation(name, annNoEffect, []string{why})
}

// nodeIPValue parses --node-ip; family rules are checked by Validate.
type nodeIPValue struct{ p *[]net.IP }

func (v *nodeIPValue) Set(s string) error {
	var ips []net.IP
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		ip := net.ParseIP(part)
		if ip == nil {
			return fmt.Errorf("%q is not an IP address", part)
		}
		ips = append(ips, ip)
	}
	*v.p = ips
	return nil
}

func (v *nodeIPValue) String() string {
	parts := make([]string, len(*v.p))
	for i, ip := range *v.p {
		parts[i] = ip.String()
	}
	return strings.Join(parts, ",")
}

func (v *nodeIPValue) Type() string { return "ips" }

// boolPtrVar registers a flag for a *bool field; "--name" alone means true.
func boolPtrVar(fs *pflag.FlagSet, p **bool, name, usage string) {
	fs.Var(&ptrValue[bool]{p: p, parse: strconv.ParseBool, typ: "bool"}, name, usage)
	fs.Lookup(name).NoOptDefVal = "true"
}
