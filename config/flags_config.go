package config

import (
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// configFlags registers the kubelet's KubeletConfiguration flags, each annotated with the field it sets
// (its JSON path), so start-up can tell which given flags nodelet acts on.
type configFlags struct{ fs *pflag.FlagSet }

func (f configFlags) field(name, path string) {
	_ = f.fs.SetAnnotation(name, annField, []string{path})
}

func (f configFlags) value(v pflag.Value, name, path, usage string) {
	f.fs.Var(v, name, usage)
	f.field(name, path)
}

func (f configFlags) str(p *string, name, path, usage string) {
	f.fs.StringVar(p, name, *p, usage)
	f.field(name, path)
}

func (f configFlags) strs(p *[]string, name, path, usage string) {
	f.fs.StringSliceVar(p, name, *p, usage)
	f.field(name, path)
}

func (f configFlags) boolean(p *bool, name, path, usage string) {
	f.fs.BoolVar(p, name, *p, usage)
	f.field(name, path)
}

func (f configFlags) i32(p *int32, name, path, usage string) {
	f.fs.Int32Var(p, name, *p, usage)
	f.field(name, path)
}

func (f configFlags) i64(p *int64, name, path, usage string) {
	f.fs.Int64Var(p, name, *p, usage)
	f.field(name, path)
}

func (f configFlags) dur(p *metav1.Duration, name, path, usage string) {
	f.fs.DurationVar(&p.Duration, name, p.Duration, usage)
	f.field(name, path)
}

func (f configFlags) boolPtr(p **bool, name, path, usage string) {
	boolPtrVar(f.fs, p, name, usage)
	f.field(name, path)
}

func (f configFlags) i32Ptr(p **int32, name, path, usage string) {
	f.value(&ptrValue[int32]{p: p, parse: parseInt32, typ: "int32"}, name, path, usage)
}

func (f configFlags) strMap(p *map[string]string, sep, name, path, usage string) {
	f.value(&mapValue{p: p, sep: sep}, name, path, usage)
}

// addConfigFlags registers every kubelet v1.37 flag that sets a KubeletConfiguration field.
func addConfigFlags(fs *pflag.FlagSet, c *Config) {
	f, k := configFlags{fs: fs}, &c.Kubelet
	addStaticPodFlags(f, k)
	addServerFlags(f, k)
	addAuthFlags(f, k)
	addTLSFlags(f, k)
	addRuntimeFlags(f, k)
	addNodeStatusFlags(f, k)
	addImageFlags(f, k)
	addCgroupFlags(f, k)
	addResourceManagerFlags(f, k)
	addResourceFlags(f, k)
	addEvictionFlags(f, k)
	addNetworkFlags(f, k)
	addAPIClientFlags(f, k)
	addLoggingFlags(f, &k.Logging)
}

func addStaticPodFlags(f configFlags, k *kubeletconfigv1beta1.KubeletConfiguration) {
	f.str(&k.StaticPodPath, "pod-manifest-path", "staticPodPath", "Path to the directory containing static pod files, or to a single static pod file.")
	f.str(&k.StaticPodURL, "manifest-url", "staticPodURL", "URL for accessing additional pod specifications to run.")
	f.value(&multimapValue{p: &k.StaticPodURLHeader}, "manifest-url-header", "staticPodURLHeader", "Comma-separated list of HTTP headers (name:value) to use when accessing --manifest-url. May be repeated.")
	f.dur(&k.SyncFrequency, "sync-frequency", "syncFrequency", "Max period between synchronizing running containers and config.")
	f.dur(&k.FileCheckFrequency, "file-check-frequency", "fileCheckFrequency", "Duration between checking static pod files for new data.")
	f.dur(&k.HTTPCheckFrequency, "http-check-frequency", "httpCheckFrequency", "Duration between checking --manifest-url for new data.")
	f.boolean(&k.RunOnce, "runonce", "runOnce", "Exit after spawning the static pods.")
}

func addServerFlags(f configFlags, k *kubeletconfigv1beta1.KubeletConfiguration) {
	f.boolPtr(&k.EnableServer, "enable-server", "enableServer", "Enable the node API server.")
	f.value(&ipStringValue{p: &k.Address}, "address", "address", "The IP address to serve on (0.0.0.0 or :: for all interfaces).")
	f.i32(&k.Port, "port", "port", "The port to serve on.")
	f.i32(&k.ReadOnlyPort, "read-only-port", "readOnlyPort", "The unauthenticated read-only port (0 disables it).")
	f.i32Ptr(&k.HealthzPort, "healthz-port", "healthzPort", "The port of the localhost healthz endpoint (0 disables it).")
	f.value(&ipStringValue{p: &k.HealthzBindAddress}, "healthz-bind-address", "healthzBindAddress", "The IP address for the healthz server.")
	f.boolPtr(&k.EnableDebuggingHandlers, "enable-debugging-handlers", "enableDebuggingHandlers", "Enable the server's log, exec, attach and port-forward endpoints.")
	f.boolean(&k.EnableContentionProfiling, "contention-profiling", "enableContentionProfiling", "Enable block profiling, if profiling is enabled.")
	f.dur(&k.StreamingConnectionIdleTimeout, "streaming-connection-idle-timeout", "streamingConnectionIdleTimeout", "Maximum idle time of a streaming connection.")
}

func addAuthFlags(f configFlags, k *kubeletconfigv1beta1.KubeletConfiguration) {
	f.str(&k.Authentication.X509.ClientCAFile, "client-ca-file", "authentication.x509.clientCAFile", "CA bundle used to authenticate client certificates.")
	f.boolPtr(&k.Authentication.Anonymous.Enabled, "anonymous-auth", "authentication.anonymous.enabled", "Allow anonymous requests to the server.")
	f.boolPtr(&k.Authentication.Webhook.Enabled, "authentication-token-webhook", "authentication.webhook.enabled", "Use the TokenReview API to authenticate bearer tokens.")
	f.dur(&k.Authentication.Webhook.CacheTTL, "authentication-token-webhook-cache-ttl", "authentication.webhook.cacheTTL", "How long to cache TokenReview responses.")
	f.str((*string)(&k.Authorization.Mode), "authorization-mode", "authorization.mode", "Authorization mode for the server: AlwaysAllow or Webhook.")
	f.dur(&k.Authorization.Webhook.CacheAuthorizedTTL, "authorization-webhook-cache-authorized-ttl", "authorization.webhook.cacheAuthorizedTTL", "How long to cache 'authorized' SubjectAccessReview responses.")
	f.dur(&k.Authorization.Webhook.CacheUnauthorizedTTL, "authorization-webhook-cache-unauthorized-ttl", "authorization.webhook.cacheUnauthorizedTTL", "How long to cache 'unauthorized' SubjectAccessReview responses.")
}

func addTLSFlags(f configFlags, k *kubeletconfigv1beta1.KubeletConfiguration) {
	f.str(&k.TLSCertFile, "tls-cert-file", "tlsCertFile", "File containing the x509 certificate for HTTPS (CA cert, if any, after the server cert).")
	f.str(&k.TLSPrivateKeyFile, "tls-private-key-file", "tlsPrivateKeyFile", "File containing the x509 private key matching --tls-cert-file.")
	f.strs(&k.TLSCipherSuites, "tls-cipher-suites", "tlsCipherSuites", "Comma-separated list of cipher suites for the server.")
	f.str(&k.TLSMinVersion, "tls-min-version", "tlsMinVersion", "Minimum TLS version supported.")
	f.boolean(&k.RotateCertificates, "rotate-certificates", "rotateCertificates", "Rotate the client certificate through the certificates API.")
	f.boolean(&k.ServerTLSBootstrap, "rotate-server-certificates", "serverTLSBootstrap", "Request and rotate the serving certificate through the certificates API.")
}

func addRuntimeFlags(f configFlags, k *kubeletconfigv1beta1.KubeletConfiguration) {
	f.str(&k.ContainerRuntimeEndpoint, "container-runtime-endpoint", "containerRuntimeEndpoint", "The endpoint of the CRI runtime service, e.g. unix:///run/containerd/containerd.sock.")
	f.str(&k.ImageServiceEndpoint, "image-service-endpoint", "imageServiceEndpoint", "The endpoint of the CRI image service. Defaults to --container-runtime-endpoint.")
	f.dur(&k.RuntimeRequestTimeout, "runtime-request-timeout", "runtimeRequestTimeout", "Timeout of runtime requests except long-running ones (pull, logs, exec, attach).")
	f.str(&k.ContainerLogMaxSize, "container-log-max-size", "containerLogMaxSize", "Maximum size of a container log file before it is rotated (e.g. 10Mi).")
	f.i32Ptr(&k.ContainerLogMaxFiles, "container-log-max-files", "containerLogMaxFiles", "Maximum number of log files kept per container (at least 2).")
	f.value(&trueOnlyValue{p: &k.SeccompDefault}, "seccomp-default", "seccompDefault", "Use RuntimeDefault as the default seccomp profile of all workloads.")
	f.fs.Lookup("seccomp-default").NoOptDefVal = "true"
	f.strs(&k.AllowedUnsafeSysctls, "allowed-unsafe-sysctls", "allowedUnsafeSysctls", "Comma-separated list of unsafe sysctls or patterns (ending in *) pods may set.")
	f.boolPtr(&k.FailSwapOn, "fail-swap-on", "failSwapOn", "Fail to start if swap is enabled on the node.")
	f.boolPtr(&k.FailCgroupV1, "fail-cgroupv1", "failCgroupV1", "Fail to start on a cgroup v1 host.")
	f.str(&k.VolumePluginDir, "volume-plugin-dir", "volumePluginDir", "Directory of third-party (flexvolume) volume plugins.")
	f.dur(&k.VolumeStatsAggPeriod, "volume-stats-agg-period", "volumeStatsAggPeriod", "How often volume disk usage is computed.")
	f.boolPtr(&k.EnableControllerAttachDetach, "enable-controller-attach-detach", "enableControllerAttachDetach", "Let the attach/detach controller attach volumes to this node.")
	f.boolPtr(&k.LocalStorageCapacityIsolation, "local-storage-capacity-isolation", "localStorageCapacityIsolation", "Enable local ephemeral storage isolation.")
}

func addNodeStatusFlags(f configFlags, k *kubeletconfigv1beta1.KubeletConfiguration) {
	f.boolPtr(&k.RegisterNode, "register-node", "registerNode", "Register the node with the API server.")
	f.value(&taintsValue{p: &k.RegisterWithTaints}, "register-with-taints", "registerWithTaints", "Register the node with the given taints (comma separated \"<key>=<value>:<effect>\"). No-op if --register-node is false.")
	f.dur(&k.NodeStatusUpdateFrequency, "node-status-update-frequency", "nodeStatusUpdateFrequency", "How often the node status is computed and posted.")
	f.i32Ptr(&k.NodeStatusMaxImages, "node-status-max-images", "nodeStatusMaxImages", "Maximum number of images reported in Node.Status.Images (-1: no cap).")
	f.str(&k.ProviderID, "provider-id", "providerID", "Unique identifier of the node in a machine database (spec.providerID).")
	f.value(&featureGatesValue{p: &k.FeatureGates}, "feature-gates", "featureGates", "Comma-separated Name=true|false pairs, added to the config file's featureGates.")
}

func addImageFlags(f configFlags, k *kubeletconfigv1beta1.KubeletConfiguration) {
	f.dur(&k.ImageMinimumGCAge, "minimum-image-ttl-duration", "imageMinimumGCAge", "Minimum age of an unused image before it is garbage collected.")
	f.i32Ptr(&k.ImageGCHighThresholdPercent, "image-gc-high-threshold", "imageGCHighThresholdPercent", "Disk usage percent above which image garbage collection always runs.")
	f.i32Ptr(&k.ImageGCLowThresholdPercent, "image-gc-low-threshold", "imageGCLowThresholdPercent", "Disk usage percent image garbage collection frees down to.")
	f.i32Ptr(&k.RegistryPullQPS, "registry-qps", "registryPullQPS", "Registry pull QPS limit (0: unlimited).")
	f.i32(&k.RegistryBurst, "registry-burst", "registryBurst", "Maximum burst of registry pulls.")
	f.boolPtr(&k.SerializeImagePulls, "serialize-image-pulls", "serializeImagePulls", "Pull images one at a time.")
}

func addCgroupFlags(f configFlags, k *kubeletconfigv1beta1.KubeletConfiguration) {
	f.str(&k.CgroupDriver, "cgroup-driver", "cgroupDriver", "Driver used to manipulate cgroups on the host: 'cgroupfs' or 'systemd'.")
	f.str(&k.CgroupRoot, "cgroup-root", "cgroupRoot", "Root cgroup for pods (\"\": the runtime's default).")
	f.boolPtr(&k.CgroupsPerQOS, "cgroups-per-qos", "cgroupsPerQOS", "Create the QoS and pod cgroup hierarchy.")
	f.str(&k.KubeletCgroups, "kubelet-cgroups", "kubeletCgroups", "Cgroup to run the node agent in.")
	f.str(&k.SystemCgroups, "system-cgroups", "systemCgroups", "Cgroup for non-kernel processes outside a cgroup.")
	f.str(&k.SystemReservedCgroup, "system-reserved-cgroup", "systemReservedCgroup", "Cgroup of the system components --system-reserved is for.")
	f.str(&k.KubeReservedCgroup, "kube-reserved-cgroup", "kubeReservedCgroup", "Cgroup of the Kubernetes components --kube-reserved is for.")
	f.boolPtr(&k.CPUCFSQuota, "cpu-cfs-quota", "cpuCFSQuota", "Enforce CPU limits with CFS quota.")
	f.value(&ptrValue[metav1.Duration]{p: &k.CPUCFSQuotaPeriod, parse: parseDuration, typ: "duration"}, "cpu-cfs-quota-period", "cpuCFSQuotaPeriod", "CPU CFS quota period (cpu.cfs_period_us).")
	f.value(&ptrValue[int64]{p: &k.PodPidsLimit, parse: parseInt64, typ: "int64"}, "pod-max-pids", "podPidsLimit", "Maximum number of processes per pod (-1: node allocatable pids).")
}

func addResourceManagerFlags(f configFlags, k *kubeletconfigv1beta1.KubeletConfiguration) {
	f.str(&k.CPUManagerPolicy, "cpu-manager-policy", "cpuManagerPolicy", "CPU manager policy: 'none' or 'static'.")
	f.value(&mapValue{p: &k.CPUManagerPolicyOptions, sep: "=", noSplit: true}, "cpu-manager-policy-options", "cpuManagerPolicyOptions", "A key=value CPU manager policy option (repeat the flag for more).")
	f.dur(&k.CPUManagerReconcilePeriod, "cpu-manager-reconcile-period", "cpuManagerReconcilePeriod", "CPU manager reconciliation period.")
	f.str(&k.MemoryManagerPolicy, "memory-manager-policy", "memoryManagerPolicy", "Memory manager policy: 'None' or 'Static'.")
	f.value(&reservedMemoryValue{p: &k.ReservedMemory}, "reserved-memory", "reservedMemory", "Memory reserved on a NUMA node, e.g. 0:memory=1Gi,hugepages-1M=2Gi (repeat per node).")
	f.str(&k.TopologyManagerPolicy, "topology-manager-policy", "topologyManagerPolicy", "Topology manager policy: none, best-effort, restricted or single-numa-node.")
	f.str(&k.TopologyManagerScope, "topology-manager-scope", "topologyManagerScope", "Topology manager scope: container or pod.")
	f.strMap(&k.TopologyManagerPolicyOptions, "=", "topology-manager-policy-options", "topologyManagerPolicyOptions", "key=value topology manager policy options.")
	f.strMap(&k.QOSReserved, "=", "qos-reserved", "qosReserved", "Resource=percentage pairs reserved at the QoS level (e.g. memory=50%).")
	f.str(&k.ReservedSystemCPUs, "reserved-cpus", "reservedSystemCPUs", "CPUs or CPU ranges reserved for system and Kubernetes components.")
}

func addResourceFlags(f configFlags, k *kubeletconfigv1beta1.KubeletConfiguration) {
	f.i32(&k.MaxPods, "max-pods", "maxPods", "Number of pods that can run on this node.")
	f.i32(&k.PodsPerCore, "pods-per-core", "podsPerCore", "Number of pods per core (0: no limit beyond --max-pods).")
	f.strMap(&k.SystemReserved, "=", "system-reserved", "systemReserved", "Resources reserved for non-kubernetes components (e.g. cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=1000).")
	f.strMap(&k.KubeReserved, "=", "kube-reserved", "kubeReserved", "Resources reserved for kubernetes system components (e.g. cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=1000).")
	f.strs(&k.EnforceNodeAllocatable, "enforce-node-allocatable", "enforceNodeAllocatable", "Levels of node allocatable enforcement: none, pods, system-reserved, kube-reserved.")
	f.i32Ptr(&k.OOMScoreAdj, "oom-score-adj", "oomScoreAdj", "The oom_score_adj of the node agent's process, in [-1000, 1000].")
	f.i64(&k.MaxOpenFiles, "max-open-files", "maxOpenFiles", "Number of files the node agent's process can open.")
	f.boolean(&k.KernelMemcgNotification, "kernel-memcg-notification", "kernelMemcgNotification", "Use kernel memcg notifications for memory eviction thresholds.")
	f.boolean(&k.ProtectKernelDefaults, "protect-kernel-defaults", "protectKernelDefaults", "Fail if kernel tunables differ from the kubelet's defaults.")
}

func addEvictionFlags(f configFlags, k *kubeletconfigv1beta1.KubeletConfiguration) {
	f.strMap(&k.EvictionHard, "<", "eviction-hard", "evictionHard", "Hard eviction thresholds (e.g. memory.available<1Gi,nodefs.available<10%).")
	f.strMap(&k.EvictionSoft, "<", "eviction-soft", "evictionSoft", "Soft eviction thresholds (e.g. memory.available<1.5Gi).")
	f.strMap(&k.EvictionSoftGracePeriod, "=", "eviction-soft-grace-period", "evictionSoftGracePeriod", "Grace periods of the soft thresholds (e.g. memory.available=1m30s).")
	f.dur(&k.EvictionPressureTransitionPeriod, "eviction-pressure-transition-period", "evictionPressureTransitionPeriod", "How long a pressure condition stays after its threshold clears.")
	f.i32(&k.EvictionMaxPodGracePeriod, "eviction-max-pod-grace-period", "evictionMaxPodGracePeriod", "Maximum grace period (s) of pods evicted on a soft threshold.")
	f.strMap(&k.EvictionMinimumReclaim, "=", "eviction-minimum-reclaim", "evictionMinimumReclaim", "Minimum reclaims per signal (e.g. imagefs.available=2Gi).")
}

func addNetworkFlags(f configFlags, k *kubeletconfigv1beta1.KubeletConfiguration) {
	f.strs(&k.ClusterDNS, "cluster-dns", "clusterDNS", "Comma-separated list of DNS server IP addresses for pods with dnsPolicy=ClusterFirst.")
	f.str(&k.ClusterDomain, "cluster-domain", "clusterDomain", "Domain for this cluster; added to containers' DNS search list.")
	f.value(&ptrValue[string]{p: &k.ResolverConfig, parse: parseString, typ: "string"}, "resolv-conf", "resolvConf", "Resolver configuration file used as the basis of containers' DNS configuration (\"\": none).")
	f.str(&k.HairpinMode, "hairpin-mode", "hairpinMode", "Hairpin NAT mode: promiscuous-bridge, hairpin-veth or none.")
	f.str(&k.PodCIDR, "pod-cidr", "podCIDR", "CIDR for pod IPs in standalone mode.")
	f.boolPtr(&k.MakeIPTablesUtilChains, "make-iptables-util-chains", "makeIPTablesUtilChains", "Ensure the iptables utility chains on the host.")
	f.i32Ptr(&k.IPTablesMasqueradeBit, "iptables-masquerade-bit", "iptablesMasqueradeBit", "Deprecated in the kubelet; no effect there either.")
	f.i32Ptr(&k.IPTablesDropBit, "iptables-drop-bit", "iptablesDropBit", "Deprecated in the kubelet; no effect there either.")
}

func addAPIClientFlags(f configFlags, k *kubeletconfigv1beta1.KubeletConfiguration) {
	f.str(&k.ContentType, "kube-api-content-type", "contentType", "Content type of requests sent to the API server.")
	f.i32Ptr(&k.KubeAPIQPS, "kube-api-qps", "kubeAPIQPS", "QPS towards the API server.")
	f.i32(&k.KubeAPIBurst, "kube-api-burst", "kubeAPIBurst", "Burst towards the API server.")
	f.i32Ptr(&k.EventRecordQPS, "event-qps", "eventRecordQPS", "QPS limit of event creation (0: unlimited).")
	f.i32(&k.EventBurst, "event-burst", "eventBurst", "Maximum burst of event creation.")
}

// addLoggingFlags binds the kubelet's logging flags to logging.* (set-only values, so that the config
// file's logging settings survive absent flags).
func addLoggingFlags(f configFlags, l *logsapi.LoggingConfiguration) {
	f.str(&l.Format, "logging-format", "logging.format", "Log format: text or json (nodelet always writes JSON).")
	f.fs.DurationVar(&l.FlushFrequency.Duration.Duration, "log-flush-frequency", l.FlushFrequency.Duration.Duration, "Maximum time between log flushes.")
	f.field("log-flush-frequency", "logging.flushFrequency")
	f.fs.VarP(logsapi.VerbosityLevelPflag(&l.Verbosity), "v", "v", "Log level verbosity.")
	f.field("v", "logging.verbosity")
	f.value(logsapi.VModuleConfigurationPflag(&l.VModule), "vmodule", "logging.vmodule", "Comma-separated pattern=N settings for file-filtered logging.")
	f.boolean(&l.Options.Text.SplitStream, "log-text-split-stream", "logging.options.text.splitStream", "In text format, write errors to stderr and info to stdout.")
	f.value(&l.Options.Text.InfoBufferSize, "log-text-info-buffer-size", "logging.options.text.infoBufferSize", "In text format with split streams, buffer size of info messages.")
	f.boolean(&l.Options.JSON.SplitStream, "log-json-split-stream", "logging.options.json.splitStream", "In JSON format, write errors to stderr and info to stdout.")
	f.value(&l.Options.JSON.InfoBufferSize, "log-json-info-buffer-size", "logging.options.json.infoBufferSize", "In JSON format with split streams, buffer size of info messages.")
}
