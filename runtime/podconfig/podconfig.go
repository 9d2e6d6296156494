package podconfig

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
)

// DefaultPodLogsDir is where the kubelet keeps container logs unless configured otherwise.
const DefaultPodLogsDir = "/var/log/pods"

const (
	etcHostsPath    = "/etc/hosts"
	hostnameMaxLen  = 63 // the kernel's nodename holds 64 bytes with the terminating NUL
	fqdnMaxLen      = 64
	logDirDelimiter = "_"
)

// ErrCreateContainerConfig marks an error in turning a container's spec into a CRI config: the kubelet
// reports it as the container's waiting reason CreateContainerConfigError, with the error's message.
var ErrCreateContainerConfig = errors.New("create container config")

// configError keeps the kubelet's message as its own while matching ErrCreateContainerConfig.
type configError struct{ err error }

func (e *configError) Error() string   { return e.err.Error() }
func (e *configError) Unwrap() []error { return []error{ErrCreateContainerConfig, e.err} }

// asConfigError marks err as a CreateContainerConfigError, keeping its message.
func asConfigError(err error) error {
	if err == nil || errors.Is(err, ErrCreateContainerConfig) {
		return err
	}
	return &configError{err: err}
}

// SandboxOptions are the node-level settings a sandbox config needs.
type SandboxOptions struct {
	ClusterDNS    []string // KubeletConfiguration.clusterDNS
	ClusterDomain string
	// ResolvConf is the host resolv.conf used for dnsPolicy Default and for the host search domains of
	// ClusterFirst. "" means none: a Default pod gets no DNS config, so the runtime copies the host's.
	ResolvConf    string
	PodLogsDir    string // default /var/log/pods
	CgroupDriver  string // "cgroupfs" | "systemd"
	CgroupsPerQOS bool
	CgroupRoot    string // "" = "/"
	// NodeHostname is the node's hostname. Host-network sandboxes get no hostname in their config, as
	// with the kubelet: they share the node's UTS namespace, and the runtime (runc) refuses to set a
	// hostname without one of its own.
	NodeHostname string
	// UserNamespace is the pod's user namespace (userns.Manager.PodUserNamespace); nil is the node's, and
	// refuses a pod that sets hostUsers: false.
	UserNamespace *runtimeapi.UserNamespace
}

// SandboxConfig builds the CRI config of the pod's sandbox like the kubelet's generatePodSandboxConfig:
// metadata, labels and annotations, DNS, hostname, log directory, port mappings and the Linux config
// (cgroup parent, sysctls, security context, resources and overhead).
func SandboxConfig(pod *corev1.Pod, attempt uint32, opts SandboxOptions) (*runtimeapi.PodSandboxConfig, error) {
	logDir, err := PodLogDir(opts.PodLogsDir, pod)
	if err != nil {
		return nil, fmt.Errorf("log directory of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   attempt,
		},
		Labels:       SandboxLabels(pod),
		Annotations:  SandboxAnnotations(pod),
		LogDirectory: logDir,
		PortMappings: portMappings(pod),
	}
	dns, err := PodDNSConfig(pod, opts)
	if err != nil {
		return nil, fmt.Errorf("dns config of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	cfg.DnsConfig = dns
	if !pod.Spec.HostNetwork {
		if cfg.Hostname, err = sandboxHostname(pod, opts.ClusterDomain); err != nil {
			return nil, err
		}
	}
	if cfg.Linux, err = linuxSandboxConfig(pod, opts); err != nil {
		return nil, fmt.Errorf("linux sandbox config of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return cfg, nil
}

// PodLogDir is the directory of the pod's container logs: <dir>/<namespace>_<name>_<uid>. A namespace,
// name or UID that is not a single path segment (podrules.PathSegment), or a directory name too long for
// one, is an error.
func PodLogDir(podLogsDir string, pod *corev1.Pod) (string, error) {
	if podLogsDir == "" {
		podLogsDir = DefaultPodLogsDir
	}
	err := pathSegments("pod namespace", pod.Namespace, "pod name", pod.Name, "pod UID", string(pod.UID))
	if err != nil {
		return "", err
	}
	name := strings.Join([]string{pod.Namespace, pod.Name, string(pod.UID)}, logDirDelimiter)
	if err := podrules.PathSegment("pod log directory", name); err != nil {
		return "", err
	}
	return filepath.Join(podLogsDir, name), nil
}

// ContainerLogDir is the directory of a container's log files: <pod log dir>/<container name>.
func ContainerLogDir(podLogsDir string, pod *corev1.Pod, containerName string) (string, error) {
	dir, err := PodLogDir(podLogsDir, pod)
	if err != nil {
		return "", err
	}
	if err := podrules.PathSegment("container name", containerName); err != nil {
		return "", err
	}
	return filepath.Join(dir, containerName), nil
}

// ContainerLogPath is a container attempt's log file relative to its pod's log directory:
// <container name>/<restartCount>.log.
func ContainerLogPath(containerName string, restartCount int) (string, error) {
	if err := podrules.PathSegment("container name", containerName); err != nil {
		return "", err
	}
	if restartCount < 0 {
		return "", fmt.Errorf("container %q: negative restart count %d", containerName, restartCount)
	}
	return filepath.Join(containerName, strconv.Itoa(restartCount)+".log"), nil
}

// pathSegments checks identifiers, given as what/value pairs, with podrules.PathSegment.
func pathSegments(whatValue ...string) error {
	for i := 0; i+1 < len(whatValue); i += 2 {
		if err := podrules.PathSegment(whatValue[i], whatValue[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// RuntimeHandler resolves the pod's RuntimeClass to the CRI runtime handler; "" (the runtime's default)
// without a RuntimeClass or a lookup.
//
//nolint:revive // the name the pod reconciler is written against
func RuntimeHandler(pod *corev1.Pod, lookup func(className string) (handler string, err error)) (string, error) {
	if lookup == nil || pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return "", nil
	}
	h, err := lookup(*pod.Spec.RuntimeClassName)
	if err != nil {
		return "", fmt.Errorf("runtime handler of RuntimeClass %q: %w", *pod.Spec.RuntimeClassName, err)
	}
	return h, nil
}

// PodHostnameAndDomain returns the pod's hostname (spec.hostnameOverride, else spec.hostname, else the
// pod's name, truncated to 63 characters) and, with spec.subdomain, its domain
// <subdomain>.<namespace>.svc.<clusterDomain>.
func PodHostnameAndDomain(pod *corev1.Pod, clusterDomain string) (hostname, domain string, err error) {
	if pod.Spec.HostnameOverride != nil {
		h := *pod.Spec.HostnameOverride
		if msgs := validation.IsDNS1123Subdomain(h); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s", h, strings.Join(msgs, ";"))
		}
		h, err = truncateHostname(pod.Name, h)
		return h, "", err
	}
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Hostname); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Hostname %q is not a valid DNS label: %s", pod.Spec.Hostname, strings.Join(msgs, ";"))
		}
		hostname = pod.Spec.Hostname
	}
	if hostname, err = truncateHostname(pod.Name, hostname); err != nil {
		return "", "", err
	}
	if pod.Spec.Subdomain != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Subdomain); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Subdomain %q is not a valid DNS label: %s", pod.Spec.Subdomain, strings.Join(msgs, ";"))
		}
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	return hostname, domain, nil
}

// truncateHostname cuts a hostname to 63 characters, then drops trailing '-' and '.'.
func truncateHostname(podName, hostname string) (string, error) {
	if len(hostname) <= hostnameMaxLen {
		return hostname, nil
	}
	truncated := strings.TrimRight(hostname[:hostnameMaxLen], "-.")
	if truncated == "" {
		return "", fmt.Errorf("hostname for pod %q was invalid: %q", podName, hostname)
	}
	return truncated, nil
}

// sandboxHostname is the hostname the kernel sees: the pod's hostname, or its FQDN with
// setHostnameAsFQDN (at most 64 characters).
func sandboxHostname(pod *corev1.Pod, clusterDomain string) (string, error) {
	hostname, domain, err := PodHostnameAndDomain(pod, clusterDomain)
	if err != nil {
		return "", err
	}
	if domain == "" || pod.Spec.SetHostnameAsFQDN == nil || !*pod.Spec.SetHostnameAsFQDN {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > fqdnMaxLen {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", fqdn, fqdnMaxLen, len(fqdn))
	}
	return fqdn, nil
}

// portMappings lists the ports of the pod's regular containers, as the kubelet does (entries without a
// hostPort included: the runtime ignores them); a port name used twice in one container counts once.
func portMappings(pod *corev1.Pod) []*runtimeapi.PortMapping {
	var pms []*runtimeapi.PortMapping
	for i := range pod.Spec.Containers {
		seen := map[string]bool{}
		for _, p := range pod.Spec.Containers[i].Ports {
			name := p.Name
			if name == "" {
				name = fmt.Sprintf("%s-%s-%s:%d:%d", ipFamily(p.HostIP), p.Protocol, p.HostIP, p.ContainerPort, p.HostPort)
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			pms = append(pms, &runtimeapi.PortMapping{
				Protocol:      runtimeProtocol(p.Protocol),
				ContainerPort: p.ContainerPort,
				HostPort:      p.HostPort,
				HostIp:        p.HostIP,
			})
		}
	}
	return pms
}

// ipFamily is "v4", "v6" or, for no address, "any".
func ipFamily(ip string) string {
	if ip == "" {
		return "any"
	}
	if a, err := netip.ParseAddr(ip); err == nil && a.Is6() && !a.Is4In6() {
		return "v6"
	}
	return "v4"
}

// runtimeProtocol maps a port protocol; unknown protocols become TCP, as with the kubelet.
func runtimeProtocol(p corev1.Protocol) runtimeapi.Protocol {
	switch p {
	case corev1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case corev1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	default:
		return runtimeapi.Protocol_TCP
	}
}

// ContainerOptions are what ContainerConfig needs beyond the pod spec.
type ContainerOptions struct {
	Env []*runtimeapi.KeyValue // from MakeEnvironment
	// Mounts are the volume mounts prepared by the caller; /etc/hosts and the termination log are added
	// by ContainerConfig from Files.
	Mounts []*runtimeapi.Mount
	// Devices are the container's devices: its device plugins' and the block volumes of its volumeDevices,
	// prepared by the caller.
	Devices []*runtimeapi.Device
	// Annotations are its device plugins' annotations; the agent's own annotations win over them.
	Annotations map[string]string
	// CDIDevices are the fully qualified CDI device names its device plugins give it.
	CDIDevices []*runtimeapi.CDIDevice
	Files      ContainerFiles
	PodIPs     []string // the sandbox's IPs, primary first (informational: env and hosts are prepared already)
	// ImageRef is the resolved image (ID or digest) to run.
	ImageRef string
	// NodeMemoryCapacity is the node's memory in bytes, for a Burstable container's oom_score_adj.
	NodeMemoryCapacity int64
	// TargetContainerID is the runtime ID of an ephemeral container's targetContainerName: the container
	// joins that container's process namespace (NamespaceMode TARGET) when it would otherwise get its own.
	TargetContainerID string
	// UserNamespace is the pod's user namespace, as for its sandbox (SandboxOptions.UserNamespace): every
	// mount of a pod with one of its own is ID-mapped to it.
	UserNamespace *runtimeapi.UserNamespace

	// ImageUID and ImageUsername are the image's user from ImageStatus, used like the kubelet does when
	// no runAsUser is set: a numeric user becomes run_as_user, a name run_as_username, and runAsNonRoot is
	// verified against them. ImageUser (LookupImageUser) reads them as the kubelet does, an image without
	// a user being root (UID 0). Both unset means unknown: the runtime applies the image's user and
	// runAsNonRoot is not verified.
	ImageUID      *int64
	ImageUsername string
	// SeccompDefault (KubeletConfiguration.seccompDefault) makes RuntimeDefault the default profile.
	SeccompDefault bool
	// SeccompProfileRoot is the directory of Localhost seccomp profiles (<rootDir>/seccomp).
	SeccompProfileRoot string
	// HostResources are the node's settings and host facts every container's resources follow.
	HostResources
}

// HostResources are what a container's CRI resources take from the node beyond its pod: the kubelet's
// configuration and facts of the host, read once at start.
type HostResources struct {
	// HugePageSizes are the host's huge page sizes in bytes (/sys/kernel/mm/hugepages): each gets a limit, 0
	// unless the container asks for that size, as with the kubelet. nil when unknown: only the sizes asked for
	// are listed.
	HugePageSizes []int64
	// CgroupV2 is true on a unified cgroup hierarchy: memory.high is reset to "max" and, unless
	// SingleProcessOOMKill, memory.oom.group is set so an OOM kills the whole container.
	CgroupV2             bool
	SingleProcessOOMKill bool
	// SwapController is true when the host's memory controller limits swap (memory.memsw.* on cgroup v1,
	// memory.swap.max on v2); without it no swap limit is set, as with the kubelet.
	SwapController bool
	// SwapBehavior is memorySwap.swapBehavior: "" or podrules.NoSwap (no container swaps), or
	// podrules.LimitedSwap (eligible containers get their share of NodeSwap, the others none).
	SwapBehavior string
	// NodeSwap is the host's swap in bytes (SwapTotal), which LimitedSwap shares out.
	NodeSwap int64
}

// ContainerConfig builds a container's CRI config like the kubelet's generateContainerConfig. Its errors
// match ErrCreateContainerConfig.
func ContainerConfig(pod *corev1.Pod, c *corev1.Container, kind runtime.ContainerKind, restartCount int, opts ContainerOptions) (*runtimeapi.ContainerConfig, error) {
	if err := verifyRunAsNonRoot(pod, c, opts.ImageUID, opts.ImageUsername); err != nil {
		return nil, asConfigError(err)
	}
	logPath, err := ContainerLogPath(c.Name, restartCount)
	if err != nil {
		return nil, asConfigError(err)
	}
	command, args := expandCommandAndArgs(c, opts.Env)
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: opts.ImageRef, UserSpecifiedImage: c.Image},
		Command:     command,
		Args:        args,
		WorkingDir:  c.WorkingDir,
		Envs:        opts.Env,
		Mounts:      idMappedMounts(containerMounts(c, opts), opts.UserNamespace),
		Devices:     opts.Devices,
		CDIDevices:  opts.CDIDevices,
		Labels:      ContainerLabels(pod, c.Name),
		Annotations: withAnnotations(opts.Annotations, ContainerAnnotations(pod, c, kind, restartCount)),
		LogPath:     logPath,
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
	}
	linux, err := linuxContainerConfig(pod, c, opts)
	if err != nil {
		return nil, asConfigError(err)
	}
	cfg.Linux = linux
	targetProcessNamespace(cfg.Linux, opts.TargetContainerID)
	return cfg, nil
}

// withAnnotations adds extra annotations to the agent's own; the agent's win.
func withAnnotations(extra, own map[string]string) map[string]string {
	for k, v := range extra {
		if _, ok := own[k]; !ok {
			own[k] = v
		}
	}
	return own
}

// targetProcessNamespace makes the container share the target container's process namespace, as the
// kubelet does for an ephemeral container's targetContainerName, unless the pod shares one already (pod
// or host PID namespace).
func targetProcessNamespace(linux *runtimeapi.LinuxContainerConfig, targetID string) {
	ns := linux.GetSecurityContext().GetNamespaceOptions()
	if targetID == "" || ns == nil || ns.Pid != runtimeapi.NamespaceMode_CONTAINER {
		return
	}
	ns.Pid = runtimeapi.NamespaceMode_TARGET
	ns.TargetId = targetID
}

// expandCommandAndArgs expands $(VAR) references in the command and args against the environment.
func expandCommandAndArgs(c *corev1.Container, env []*runtimeapi.KeyValue) (command, args []string) {
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		vars[kv.Key] = string(kv.Value)
	}
	mapping := mappingFor(vars)
	for _, s := range c.Command {
		command = append(command, Expand(s, mapping))
	}
	for _, s := range c.Args {
		args = append(args, Expand(s, mapping))
	}
	return command, args
}

// idMappedMounts maps every mount of a pod with a user namespace of its own to that namespace's IDs (the
// runtime makes ID-mapped mounts of them), as the kubelet does; the caller's mounts are left as they are.
func idMappedMounts(mounts []*runtimeapi.Mount, userns *runtimeapi.UserNamespace) []*runtimeapi.Mount {
	if userns == nil || userns.Mode != runtimeapi.NamespaceMode_POD {
		return mounts
	}
	out := make([]*runtimeapi.Mount, len(mounts))
	for i, m := range mounts {
		m = proto.CloneOf(m)
		m.UidMappings, m.GidMappings = userns.Uids, userns.Gids
		out[i] = m
	}
	return out
}

// containerMounts are the caller's mounts, then /etc/hosts (unless the container mounts something
// there itself), then the termination message file.
func containerMounts(c *corev1.Container, opts ContainerOptions) []*runtimeapi.Mount {
	mounts := make([]*runtimeapi.Mount, 0, len(opts.Mounts)+2)
	mounts = append(mounts, opts.Mounts...)
	if opts.Files.EtcHosts != "" && !mountsEtcHosts(c, opts.Mounts) {
		mounts = append(mounts, &runtimeapi.Mount{HostPath: opts.Files.EtcHosts, ContainerPath: etcHostsPath})
	}
	if opts.Files.TerminationLog != "" && c.TerminationMessagePath != "" {
		mounts = append(mounts, &runtimeapi.Mount{
			HostPath:      opts.Files.TerminationLog,
			ContainerPath: c.TerminationMessagePath,
		})
	}
	return mounts
}

func mountsEtcHosts(c *corev1.Container, mounts []*runtimeapi.Mount) bool {
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == etcHostsPath {
			return true
		}
	}
	for _, m := range mounts {
		if m.ContainerPath == etcHostsPath {
			return true
		}
	}
	return false
}
