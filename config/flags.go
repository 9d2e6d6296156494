package config

import (
	"fmt"
	"net"
	"strings"

	"github.com/spf13/pflag"
)

// NewFlagSet returns nodelet's flag set (kubelet flag names) bound to c.
// Each flag writes into c only when it is given, so flags override whatever
// c already holds (the --config file) and absent flags leave it alone. The
// defaults shown in usage are c's values at the time of the call.
func NewFlagSet(c *Config) *pflag.FlagSet {
	fs := pflag.NewFlagSet("nodelet", pflag.ContinueOnError)
	fs.SetNormalizeFunc(wordSepNormalize)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: nodelet [flags]\n\nnodelet is a Kubernetes node agent that accepts the kubelet's config file and flags.\n\nFlags:\n%s", fs.FlagUsages())
	}
	addGeneralFlags(fs, c)
	addNodeFlags(fs, c)
	addRuntimeFlags(fs, c)
	addServerFlags(fs, c)
	addAuthFlags(fs, c)
	addResourceFlags(fs, c)
	return fs
}

// wordSepNormalize accepts --foo_bar for --foo-bar, as the kubelet does.
func wordSepNormalize(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
}

func addGeneralFlags(fs *pflag.FlagSet, c *Config) {
	fs.StringVar(&c.ConfigFile, "config", c.ConfigFile, "Path to a KubeletConfiguration file (kubelet.config.k8s.io/v1beta1). Relative paths inside it are resolved against its directory. Flags override values from this file.")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "Path to a kubeconfig file for the API server. Omit it to run in standalone mode.")
	fs.StringVar(&c.RootDir, "root-dir", c.RootDir, "Directory path for managing kubelet files (volume mounts, etc).")
	fs.IntVarP(&c.Verbosity, "v", "v", c.Verbosity, "Log level verbosity.")
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", c.MetricsBindAddress, "host:port for nodelet's own Prometheus metrics endpoint; \"0\" disables it.")
}

func addNodeFlags(fs *pflag.FlagSet, c *Config) {
	k := &c.Kubelet
	fs.StringVar(&c.HostnameOverride, "hostname-override", c.HostnameOverride, "If non-empty, use this string as the node's name instead of the actual hostname.")
	fs.Var(&nodeIPValue{p: &c.NodeIPs}, "node-ip", "IP address (or comma-separated dual-stack pair of IP addresses) of the node.")
	fs.Var(&mapValue{p: &c.NodeLabels, sep: "=", merge: true}, "node-labels", "Labels to add when registering the node (key=value pairs separated by ','). Labels in the 'kubernetes.io' namespace must be in the set the kubelet may set on itself.")
	fs.Var(&taintsValue{p: &k.RegisterWithTaints}, "register-with-taints", "Register the node with the given taints (comma separated \"<key>=<value>:<effect>\"). No-op if --register-node is false.")
	boolPtrVar(fs, &k.RegisterNode, "register-node", "Register the node with the API server.")
	fs.StringVar(&k.StaticPodPath, "pod-manifest-path", k.StaticPodPath, "Path to the directory containing static pod files, or to a single static pod file.")
	fs.StringVar(&k.StaticPodURL, "manifest-url", k.StaticPodURL, "URL for accessing additional pod specifications to run.")
	fs.Var(&multimapValue{p: &k.StaticPodURLHeader}, "manifest-url-header", "Comma-separated list of HTTP headers (name:value) to use when accessing --manifest-url. May be repeated.")
	fs.DurationVar(&k.NodeStatusUpdateFrequency.Duration, "node-status-update-frequency", k.NodeStatusUpdateFrequency.Duration, "How often the node status is computed and posted.")
}

func addRuntimeFlags(fs *pflag.FlagSet, c *Config) {
	k := &c.Kubelet
	fs.StringVar(&k.ContainerRuntimeEndpoint, "container-runtime-endpoint", k.ContainerRuntimeEndpoint, "The endpoint of the CRI runtime service, e.g. unix:///run/containerd/containerd.sock.")
	fs.StringVar(&k.ImageServiceEndpoint, "image-service-endpoint", k.ImageServiceEndpoint, "The endpoint of the CRI image service. Defaults to --container-runtime-endpoint.")
	fs.DurationVar(&k.RuntimeRequestTimeout.Duration, "runtime-request-timeout", k.RuntimeRequestTimeout.Duration, "Timeout of runtime requests except long-running ones (pull, logs, exec, attach).")
	fs.StringVar(&k.CgroupDriver, "cgroup-driver", k.CgroupDriver, "Driver used to manipulate cgroups on the host: 'cgroupfs' or 'systemd'.")
	boolPtrVar(fs, &k.FailSwapOn, "fail-swap-on", "Fail to start if swap is enabled on the node.")
	var ignored string
	fs.StringVar(&ignored, "pod-infra-container-image", "", "Ignored (accepted for compatibility with old kubelet command lines): the sandbox image is configured in the container runtime.")
}

func addServerFlags(fs *pflag.FlagSet, c *Config) {
	k := &c.Kubelet
	fs.Var(&ipStringValue{p: &k.Address}, "address", "The IP address to serve on (0.0.0.0 or :: for all interfaces).")
	fs.Int32Var(&k.Port, "port", k.Port, "The port to serve on.")
	fs.Var(&int32PtrValue{p: &k.HealthzPort}, "healthz-port", "The port of the localhost healthz endpoint (0 disables it).")
	fs.Var(&ipStringValue{p: &k.HealthzBindAddress}, "healthz-bind-address", "The IP address for the healthz server.")
	fs.StringSliceVar(&k.ClusterDNS, "cluster-dns", k.ClusterDNS, "Comma-separated list of DNS server IP addresses for pods with dnsPolicy=ClusterFirst.")
	fs.StringVar(&k.ClusterDomain, "cluster-domain", k.ClusterDomain, "Domain for this cluster; added to containers' DNS search list.")
	fs.StringVar(&k.TLSCertFile, "tls-cert-file", k.TLSCertFile, "File containing the x509 certificate for HTTPS (CA cert, if any, after the server cert).")
	fs.StringVar(&k.TLSPrivateKeyFile, "tls-private-key-file", k.TLSPrivateKeyFile, "File containing the x509 private key matching --tls-cert-file.")
}

func addAuthFlags(fs *pflag.FlagSet, c *Config) {
	k := &c.Kubelet
	fs.StringVar(&k.Authentication.X509.ClientCAFile, "client-ca-file", k.Authentication.X509.ClientCAFile, "CA bundle used to authenticate client certificates.")
	boolPtrVar(fs, &k.Authentication.Anonymous.Enabled, "anonymous-auth", "Allow anonymous requests to the server.")
	boolPtrVar(fs, &k.Authentication.Webhook.Enabled, "authentication-token-webhook", "Use the TokenReview API to authenticate bearer tokens.")
	fs.StringVar((*string)(&k.Authorization.Mode), "authorization-mode", string(k.Authorization.Mode), "Authorization mode for the server: AlwaysAllow or Webhook.")
}

func addResourceFlags(fs *pflag.FlagSet, c *Config) {
	k := &c.Kubelet
	fs.Int32Var(&k.MaxPods, "max-pods", k.MaxPods, "Number of pods that can run on this node.")
	fs.Var(&mapValue{p: &k.EvictionHard, sep: "<"}, "eviction-hard", "Hard eviction thresholds (e.g. memory.available<1Gi,nodefs.available<10%).")
	fs.Var(&mapValue{p: &k.SystemReserved, sep: "="}, "system-reserved", "Resources reserved for non-kubernetes components (e.g. cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=1000).")
	fs.Var(&mapValue{p: &k.KubeReserved, sep: "="}, "kube-reserved", "Resources reserved for kubernetes system components (e.g. cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=1000).")
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
	fs.Var(&boolPtrValue{p: p}, name, usage)
	fs.Lookup(name).NoOptDefVal = "true"
}
