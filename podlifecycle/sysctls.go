package podlifecycle

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"

	"github.com/nodelet/nodelet/podrules"
)

// reasonSysctlForbidden is the kubelet's admission failure reason for a sysctl it does not allow.
const reasonSysctlForbidden = "SysctlForbidden"

// safeSysctls are the kubelet's (v1.37) safe sysctls: namespaced and isolated, so a pod may set them
// without affecting other pods. A kernel release, when given, is the first that namespaces the sysctl;
// older kernels do not get it.
var safeSysctls = []struct{ name, kernel string }{
	{name: "kernel.shm_rmid_forced"},
	{name: "net.ipv4.ip_local_port_range"},
	{name: "net.ipv4.tcp_syncookies"},
	{name: "net.ipv4.ping_group_range"},
	{name: "net.ipv4.ip_unprivileged_port_start"},
	{name: "net.ipv4.ip_local_reserved_ports", kernel: "3.16"},
	{name: "net.ipv4.tcp_keepalive_time", kernel: "4.5"},
	{name: "net.ipv4.tcp_fin_timeout", kernel: "4.6"},
	{name: "net.ipv4.tcp_keepalive_intvl", kernel: "4.5"},
	{name: "net.ipv4.tcp_keepalive_probes", kernel: "4.5"},
	{name: "net.ipv4.tcp_rmem", kernel: "4.15"},
	{name: "net.ipv4.tcp_wmem", kernel: "4.15"},
	{name: "net.ipv4.tcp_slow_start_after_idle", kernel: "4.15"},
	{name: "net.ipv4.tcp_notsent_lowat", kernel: "4.6"},
}

// sysctlMaxLength and sysctlPattern are the API's rules for a sysctl name or pattern (a trailing "*"
// matches any suffix), with "." or "/" between segments.
const (
	sysctlMaxLength  = 253
	sysctlPatternFmt = `([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]`
)

var sysctlPatternRegexp = regexp.MustCompile("^" + sysctlPatternFmt + "$")

// SysctlAllowlist decides which sysctls a pod may set, as the kubelet's sysctl admit handler does: the
// safe sysctls plus the allowedUnsafeSysctls of the KubeletConfiguration, each known to be namespaced by
// the kernel; one in a namespace the pod shares with the host (net with hostNetwork, IPC with hostIPC,
// user without a user namespace) is forbidden.
type SysctlAllowlist struct {
	names    map[string]utilsysctl.Namespace
	prefixes map[string]utilsysctl.Namespace
}

// NewSysctlAllowlist builds the allowlist for a kernel release (uname -r, e.g. "6.1.0-18-amd64"; ""
// when unknown: only the safe sysctls that need no particular kernel) and the allowedUnsafeSysctls
// patterns ("kernel.msg*"). A pattern that is invalid or not known to be namespaced is an error, as it
// keeps the kubelet from starting.
func NewSysctlAllowlist(kernelRelease string, allowedUnsafe []string) (*SysctlAllowlist, error) {
	a := &SysctlAllowlist{names: map[string]utilsysctl.Namespace{}, prefixes: map[string]utilsysctl.Namespace{}}
	for _, p := range append(safeSysctlsFor(kernelRelease), allowedUnsafe...) {
		if err := a.add(p); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// safeSysctlsFor lists the safe sysctls the kernel release namespaces.
func safeSysctlsFor(kernelRelease string) []string {
	kernel, _ := version.ParseGeneric(kernelRelease) // nil when unknown
	var out []string
	for _, s := range safeSysctls {
		if s.kernel == "" || (kernel != nil && kernel.AtLeast(version.MustParseGeneric(s.kernel))) {
			out = append(out, s.name)
		}
	}
	return out
}

// add allows a sysctl or a pattern ending in "*".
func (a *SysctlAllowlist) add(pattern string) error {
	if len(pattern) > sysctlMaxLength || !sysctlPatternRegexp.MatchString(pattern) {
		return fmt.Errorf("sysctl %q must have at most %d characters and match regex %s", pattern, sysctlMaxLength, sysctlPatternFmt)
	}
	ns, nameOrPrefix, prefixed := utilsysctl.GetNamespace(pattern)
	if ns == utilsysctl.UnknownNamespace {
		return fmt.Errorf("the sysctls %q are not known to be namespaced", nameOrPrefix)
	}
	if prefixed {
		a.prefixes[nameOrPrefix] = ns
	} else {
		a.names[nameOrPrefix] = ns
	}
	return nil
}

// check says why a sysctl (either separator) may not be set by a pod with these host namespaces, or nil.
func (a *SysctlAllowlist) check(sysctl string, hostNet, hostIPC, hostUsers bool) error {
	sysctl = utilsysctl.NormalizeName(sysctl)
	ns, ok := a.names[sysctl]
	if !ok {
		for p, pns := range a.prefixes {
			if strings.HasPrefix(sysctl, p) {
				ns, ok = pns, true
				break
			}
		}
	}
	if !ok {
		return fmt.Errorf("%q not allowlisted", sysctl)
	}
	if (ns == utilsysctl.IPCNamespace && hostIPC) || (ns == utilsysctl.NetNamespace && hostNet) ||
		(ns == utilsysctl.UserNamespace && hostUsers) {
		return fmt.Errorf("%q not allowed with host %s enabled", sysctl, ns)
	}
	return nil
}

// defaultSysctls is the allowlist of a reconciler given none: the safe sysctls of any kernel.
var defaultSysctls = mustSysctlAllowlist(NewSysctlAllowlist("", nil))

func mustSysctlAllowlist(a *SysctlAllowlist, err error) *SysctlAllowlist {
	if err != nil {
		panic(err)
	}
	return a
}

// admit rejects a pod that sets a sysctl the allowlist forbids (SysctlForbidden, the first one
// reported). A nil allowlist is defaultSysctls.
func (a *SysctlAllowlist) admit(pod *corev1.Pod) admissionResult {
	if a == nil {
		a = defaultSysctls
	}
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return admissionResult{admit: true}
	}
	hostUsers := !podrules.OwnUserNamespace(pod)
	for _, s := range sc.Sysctls {
		if err := a.check(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC, hostUsers); err != nil {
			return admissionResult{reason: reasonSysctlForbidden, message: fmt.Sprintf("forbidden sysctl: %v", err)}
		}
	}
	return admissionResult{admit: true}
}
