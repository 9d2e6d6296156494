package podconfig

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
)

// PodCgroupName is the pod's cgroup with these sandbox options (podrules.PodCgroupName below the kubepods
// cgroup of opts.CgroupRoot); nil without cgroupsPerQOS, leaving the choice to the runtime.
func PodCgroupName(pod *corev1.Pod, opts SandboxOptions) podrules.CgroupName {
	if !opts.CgroupsPerQOS {
		return nil
	}
	return podrules.PodCgroupName(podrules.KubepodsCgroupName(opts.CgroupRoot), podrules.GetPodQOS(pod), pod.UID)
}

// PodCgroupParent is the pod's cgroup for the sandbox's cgroup_parent: PodCgroupName as a cgroupfs path with
// the cgroupfs driver, the expanded slice path
// (/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with '_' for '-'>.slice) with the
// systemd driver; "" without cgroupsPerQOS.
func PodCgroupParent(pod *corev1.Pod, opts SandboxOptions) string {
	name := PodCgroupName(pod, opts)
	if name == nil {
		return ""
	}
	return name.Path(opts.CgroupDriver)
}

// linuxSandboxConfig is the sandbox's Linux config like the kubelet's generatePodSandboxLinuxConfig
// and applySandboxResources.
func linuxSandboxConfig(pod *corev1.Pod, opts SandboxOptions) (*runtimeapi.LinuxPodSandboxConfig, error) {
	ns, err := namespaceOptions(pod, opts.UserNamespace)
	if err != nil {
		return nil, err
	}
	sc := &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: ns,
		Privileged:       hasPrivilegedContainer(pod),
		Seccomp:          &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		sc.RunAsUser = int64Value(psc.RunAsUser)
		sc.RunAsGroup = int64Value(psc.RunAsGroup)
		sc.SelinuxOptions = seLinuxOptions(psc.SELinuxOptions)
		sc.SupplementalGroups = supplementalGroups(psc)
		if sc.SupplementalGroupsPolicy, err = supplementalGroupsPolicy(psc); err != nil {
			return nil, err
		}
	}
	return &runtimeapi.LinuxPodSandboxConfig{
		CgroupParent:    PodCgroupParent(pod, opts),
		SecurityContext: sc,
		Sysctls:         podSysctls(pod),
		Resources:       sandboxResources(pod),
		Overhead:        overheadResources(pod),
	}, nil
}

// podSysctls are the pod's sysctls for the sandbox, named with dots as runc requires ("kernel/shm_rmid_forced"
// is passed as "kernel.shm_rmid_forced"), as the kubelet does before it creates the sandbox.
func podSysctls(pod *corev1.Pod) map[string]string {
	s := map[string]string{}
	if pod.Spec.SecurityContext != nil {
		for _, sysctl := range pod.Spec.SecurityContext.Sysctls {
			s[utilsysctl.NormalizeName(sysctl.Name)] = sysctl.Value
		}
	}
	return s
}

// sandboxResources are the pod's aggregate requests and limits, overhead excluded.
func sandboxResources(pod *corev1.Pod) *runtimeapi.LinuxContainerResources {
	opts := podrules.ResourceOptions{ExcludeOverhead: true}
	req, lim := podrules.PodRequests(pod, opts), podrules.PodLimits(pod, opts)
	cpuRequest := lim[corev1.ResourceCPU]
	if q, ok := req[corev1.ResourceCPU]; ok {
		cpuRequest = q
	}
	return linuxResources(cpuRequest, lim[corev1.ResourceCPU], lim[corev1.ResourceMemory])
}

// overheadResources treat the RuntimeClass overhead as requests equal to limits.
func overheadResources(pod *corev1.Pod) *runtimeapi.LinuxContainerResources {
	if pod.Spec.Overhead == nil {
		return &runtimeapi.LinuxContainerResources{}
	}
	cpu := pod.Spec.Overhead[corev1.ResourceCPU]
	return linuxResources(cpu, cpu, pod.Spec.Overhead[corev1.ResourceMemory])
}

// linuxResources: cpu shares from the request (at least 2), a CFS quota from the limit over a 100ms
// period (none without a limit), the memory limit.
func linuxResources(cpuRequest, cpuLimit, memoryLimit resource.Quantity) *runtimeapi.LinuxContainerResources {
	return &runtimeapi.LinuxContainerResources{
		CpuShares:          podrules.MilliCPUToShares(cpuRequest.MilliValue()),
		CpuQuota:           podrules.MilliCPUToQuota(cpuLimit.MilliValue(), podrules.QuotaPeriod),
		CpuPeriod:          podrules.QuotaPeriod,
		MemoryLimitInBytes: memoryLimit.Value(),
	}
}

// linuxContainerConfig is the container's Linux config like the kubelet's generateLinuxContainerConfig.
func linuxContainerConfig(pod *corev1.Pod, c *corev1.Container, opts ContainerOptions) (*runtimeapi.LinuxContainerConfig, error) {
	sc, err := containerSecurityContext(pod, c, opts)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.LinuxContainerConfig{Resources: ContainerResources(pod, c, opts), SecurityContext: sc}, nil
}

// ContainerResources are the container's CRI resources, at creation and on an in-place resize: its cpu
// request (defaulting to its limit), cpu and memory limits (pod-level limits stand in for unset ones),
// oom_score_adj, huge page limits, cgroup v2 settings and swap.
func ContainerResources(pod *corev1.Pod, c *corev1.Container, opts ContainerOptions) *runtimeapi.LinuxContainerResources {
	cpuLimit := podrules.ContainerLimit(pod, c, corev1.ResourceCPU)
	cpuRequest, ok := c.Resources.Requests[corev1.ResourceCPU]
	if !ok {
		cpuRequest = cpuLimit
	}
	r := linuxResources(cpuRequest, cpuLimit, podrules.ContainerLimit(pod, c, corev1.ResourceMemory))
	r.OomScoreAdj = int64(OOMScoreAdjust(pod, c, opts.NodeMemoryCapacity))
	r.HugepageLimits = hugepageLimits(pod, c, opts.HugePageSizes)
	if opts.CgroupV2 {
		r.Unified = map[string]string{"memory.high": "max"}
		if !opts.SingleProcessOOMKill {
			r.Unified["memory.oom.group"] = "1"
		}
	}
	setSwap(r, pod, c, opts)
	return r
}

// setSwap limits the container's swap as the kubelet's configureContainerSwapResources: nothing without a swap
// controller; with LimitedSwap an eligible container's share of the node's swap (memory.swap.max, cgroup v2
// only); otherwise no swap: memory+swap equal to the memory limit on cgroup v1 (memory.memsw.limit_in_bytes),
// memory.swap.max 0 on v2. A share that cannot be computed (a request above the node's memory) is no swap, as
// with the kubelet.
func setSwap(r *runtimeapi.LinuxContainerResources, pod *corev1.Pod, c *corev1.Container, opts ContainerOptions) {
	if !opts.SwapController {
		return
	}
	if !opts.CgroupV2 {
		r.MemorySwapLimitInBytes = r.MemoryLimitInBytes
		return
	}
	swap := int64(0)
	if opts.SwapBehavior == podrules.LimitedSwap && podrules.LimitedSwapEligible(pod, c, podrules.GetPodQOS(pod), true) {
		if n, err := podrules.LimitedSwapBytes(c.Resources.Requests.Memory().Value(), opts.NodeMemoryCapacity, opts.NodeSwap); err == nil {
			swap = n
		}
	}
	if r.Unified == nil {
		r.Unified = map[string]string{}
	}
	r.Unified["memory.swap.max"] = strconv.FormatInt(swap, 10)
}

// hugepageLimits sets a limit for each of the host's page sizes: the container's hugepages-<size> limit,
// else the pod-level one, else 0; a size the host lacks is left out, as the kubelet's
// GetHugepageLimitsFromResources does. Without known host sizes, the sizes asked for are listed.
func hugepageLimits(pod *corev1.Pod, c *corev1.Container, sizes []int64) []*runtimeapi.HugepageLimit {
	required := map[int64]int64{}
	if podrules.PodLevelResourcesSet(pod) {
		maps.Copy(required, podrules.HugePageLimits(pod.Spec.Resources.Limits))
	}
	maps.Copy(required, podrules.HugePageLimits(c.Resources.Limits))
	if sizes == nil {
		sizes = slices.Sorted(maps.Keys(required))
	}
	var limits []*runtimeapi.HugepageLimit
	for _, size := range sizes {
		if name, ok := podrules.HugePageSizeName(size); ok {
			limits = append(limits, &runtimeapi.HugepageLimit{PageSize: name, Limit: uint64(max(required[size], 0))})
		}
	}
	return limits
}

// namespaceOptions: IPC and network shared with the node or the pod, PID per container unless the pod
// shares it or uses the host's; the user namespace userns (nil: the node's, which a pod that sets
// hostUsers: false cannot have).
func namespaceOptions(pod *corev1.Pod, userns *runtimeapi.UserNamespace) (*runtimeapi.NamespaceOption, error) {
	if userns == nil {
		if podrules.OwnUserNamespace(pod) {
			return nil, errors.New("can't set `spec.hostUsers: false`, runtime does not support user namespaces")
		}
		userns = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}
	}
	ns := &runtimeapi.NamespaceOption{
		Network:       runtimeapi.NamespaceMode_POD,
		Pid:           runtimeapi.NamespaceMode_CONTAINER,
		Ipc:           runtimeapi.NamespaceMode_POD,
		UsernsOptions: userns,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns, nil
}

// hasPrivilegedContainer tells whether any init, regular or ephemeral container is privileged.
func hasPrivilegedContainer(pod *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if isPrivileged(cs[i].SecurityContext) {
				return true
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if isPrivileged(pod.Spec.EphemeralContainers[i].SecurityContext) {
			return true
		}
	}
	return false
}

func isPrivileged(sc *corev1.SecurityContext) bool {
	return sc != nil && sc.Privileged != nil && *sc.Privileged
}

func int64Value(v *int64) *runtimeapi.Int64Value {
	if v == nil {
		return nil
	}
	return &runtimeapi.Int64Value{Value: *v}
}

func seLinuxOptions(o *corev1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

// supplementalGroups: the fsGroup, then the pod's supplemental groups.
func supplementalGroups(psc *corev1.PodSecurityContext) []int64 {
	var groups []int64
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	return append(groups, psc.SupplementalGroups...)
}

func supplementalGroupsPolicy(psc *corev1.PodSecurityContext) (runtimeapi.SupplementalGroupsPolicy, error) {
	if psc.SupplementalGroupsPolicy == nil {
		return runtimeapi.SupplementalGroupsPolicy_Merge, nil
	}
	v, ok := runtimeapi.SupplementalGroupsPolicy_value[string(*psc.SupplementalGroupsPolicy)]
	if !ok {
		return 0, fmt.Errorf("unsupported supplementalGroupsPolicy: %s", *psc.SupplementalGroupsPolicy)
	}
	return runtimeapi.SupplementalGroupsPolicy(v), nil
}

// effectiveSecurityContext merges the pod's security context (user, group, runAsNonRoot, SELinux) with
// the container's, whose fields win.
func effectiveSecurityContext(pod *corev1.Pod, c *corev1.Container) *corev1.SecurityContext {
	eff := &corev1.SecurityContext{}
	if psc := pod.Spec.SecurityContext; psc != nil {
		eff.SELinuxOptions = psc.SELinuxOptions
		eff.RunAsUser = psc.RunAsUser
		eff.RunAsGroup = psc.RunAsGroup
		eff.RunAsNonRoot = psc.RunAsNonRoot
	}
	csc := c.SecurityContext
	if csc == nil {
		return eff
	}
	override(&eff.SELinuxOptions, csc.SELinuxOptions)
	override(&eff.Capabilities, csc.Capabilities)
	override(&eff.Privileged, csc.Privileged)
	override(&eff.RunAsUser, csc.RunAsUser)
	override(&eff.RunAsGroup, csc.RunAsGroup)
	override(&eff.RunAsNonRoot, csc.RunAsNonRoot)
	override(&eff.ReadOnlyRootFilesystem, csc.ReadOnlyRootFilesystem)
	override(&eff.AllowPrivilegeEscalation, csc.AllowPrivilegeEscalation)
	override(&eff.ProcMount, csc.ProcMount)
	return eff
}

func override[T any](dst **T, src *T) {
	if src != nil {
		*dst = src
	}
}

// containerSecurityContext is the container's CRI security context like the kubelet's
// determineEffectiveSecurityContext.
func containerSecurityContext(pod *corev1.Pod, c *corev1.Container, opts ContainerOptions) (*runtimeapi.LinuxContainerSecurityContext, error) {
	eff := effectiveSecurityContext(pod, c)
	sc := &runtimeapi.LinuxContainerSecurityContext{
		Capabilities:   capabilities(eff.Capabilities),
		SelinuxOptions: seLinuxOptions(eff.SELinuxOptions),
		RunAsUser:      int64Value(eff.RunAsUser),
		RunAsGroup:     int64Value(eff.RunAsGroup),
		Privileged:     eff.Privileged != nil && *eff.Privileged,
		ReadonlyRootfs: eff.ReadOnlyRootFilesystem != nil && *eff.ReadOnlyRootFilesystem,
		NoNewPrivs:     eff.AllowPrivilegeEscalation != nil && !*eff.AllowPrivilegeEscalation,
		MaskedPaths:    maskedPaths(eff.ProcMount),
		ReadonlyPaths:  readonlyPaths(eff.ProcMount),
	}
	if sc.RunAsUser == nil {
		sc.RunAsUser = int64Value(opts.ImageUID)
		sc.RunAsUsername = opts.ImageUsername
	}
	var err error
	if sc.Seccomp, err = seccompProfile(pod, c, opts); err != nil {
		return nil, err
	}
	// The deprecated string field too, as the kubelet sets it for older runtimes.
	if sc.Apparmor, sc.ApparmorProfile, err = appArmorProfile(pod, c); err != nil { //nolint:staticcheck // see above
		return nil, err
	}
	if sc.NamespaceOptions, err = namespaceOptions(pod, opts.UserNamespace); err != nil {
		return nil, err
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		sc.SupplementalGroups = supplementalGroups(psc)
		if sc.SupplementalGroupsPolicy, err = supplementalGroupsPolicy(psc); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

func capabilities(c *corev1.Capabilities) *runtimeapi.Capability {
	if c == nil {
		return nil
	}
	out := &runtimeapi.Capability{
		AddCapabilities:  make([]string, 0, len(c.Add)),
		DropCapabilities: make([]string, 0, len(c.Drop)),
	}
	for _, a := range c.Add {
		out.AddCapabilities = append(out.AddCapabilities, string(a))
	}
	for _, d := range c.Drop {
		out.DropCapabilities = append(out.DropCapabilities, string(d))
	}
	return out
}

// seccompProfile: the container's profile, else the pod's, else RuntimeDefault with SeccompDefault
// (seccompDefault) and Unconfined without, as the kubelet's getSeccompProfile. A Localhost profile is a file
// under SeccompProfileRoot.
func seccompProfile(pod *corev1.Pod, c *corev1.Container, opts ContainerOptions) (*runtimeapi.SecurityProfile, error) {
	var p *corev1.SeccompProfile
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		p = c.SecurityContext.SeccompProfile
	} else if pod.Spec.SecurityContext != nil {
		p = pod.Spec.SecurityContext.SeccompProfile
	}
	switch {
	case p == nil && opts.SeccompDefault, p != nil && p.Type == corev1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case p != nil && p.Type == corev1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, errors.New("localhostProfile must be set if seccompProfile type is Localhost")
		}
		if err := localDescendingPath(*p.LocalhostProfile); err != nil {
			return nil, fmt.Errorf("seccomp localhostProfile %q: %w", *p.LocalhostProfile, err)
		}
		return &runtimeapi.SecurityProfile{
			ProfileType:  runtimeapi.SecurityProfile_Localhost,
			LocalhostRef: filepath.Join(opts.SeccompProfileRoot, *p.LocalhostProfile),
		}, nil
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
}

// SeccompProfileRoot is the directory of Localhost seccomp profiles, <root-dir>/seccomp, as the kubelet's.
func SeccompProfileRoot(rootDir string) string { return filepath.Join(rootDir, "seccomp") }

// localDescendingPath is the API's rule for a Localhost seccomp profile, checked again here since static
// pods and the runtime's labels bypass API validation: a relative path without a ".." element, so the
// profile stays under the seccomp profile root (<root-dir>/seccomp).
func localDescendingPath(p string) error {
	if filepath.IsAbs(p) {
		return errors.New("must be a relative path")
	}
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		if part == ".." {
			return errors.New("must not contain '..'")
		}
	}
	return nil
}

// appArmorProfile: the container's profile, else the deprecated per-container pod annotation, else the
// pod's; with the deprecated profile string for older runtimes.
func appArmorProfile(pod *corev1.Pod, c *corev1.Container) (*runtimeapi.SecurityProfile, string, error) {
	p := effectiveAppArmorProfile(pod, c)
	if p == nil {
		return nil, "", nil
	}
	switch p.Type {
	case corev1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
			corev1.DeprecatedAppArmorBetaProfileRuntimeDefault, nil
	case corev1.AppArmorProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
			corev1.DeprecatedAppArmorBetaProfileNameUnconfined, nil
	case corev1.AppArmorProfileTypeLocalhost:
		if p.LocalhostProfile == nil {
			return nil, "", errors.New("missing localhost apparmor profile name")
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *p.LocalhostProfile},
			corev1.DeprecatedAppArmorBetaProfileNamePrefix + *p.LocalhostProfile, nil
	}
	return nil, "", fmt.Errorf("unknown apparmor profile type: %q", p.Type)
}

func effectiveAppArmorProfile(pod *corev1.Pod, c *corev1.Container) *corev1.AppArmorProfile {
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		return c.SecurityContext.AppArmorProfile
	}
	if v, ok := pod.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; ok {
		switch {
		case v == corev1.DeprecatedAppArmorBetaProfileRuntimeDefault:
			return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
		case v == corev1.DeprecatedAppArmorBetaProfileNameUnconfined:
			return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		case strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix):
			name := strings.TrimPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix)
			return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
		}
	}
	if pod.Spec.SecurityContext != nil {
		return pod.Spec.SecurityContext.AppArmorProfile
	}
	return nil
}

// The runtime's default masked and read-only paths (kept in sync with moby, as the kubelet does).
var (
	defaultMaskedPaths = sync.OnceValue(func() []string {
		paths := []string{
			"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
			"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
			"/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
		}
		for _, cpu := range possibleCPUs() {
			p := fmt.Sprintf("/sys/devices/system/cpu/cpu%d/thermal_throttle", cpu)
			if _, err := os.Stat(p); err == nil {
				paths = append(paths, p)
			}
		}
		return paths
	})
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// possibleCPUs lists the CPU numbers of /sys/devices/system/cpu/possible ("0-3,8"), else 0..NumCPU-1.
func possibleCPUs() []int {
	data, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err == nil {
		if cpus, ok := parseCPUList(strings.TrimSpace(string(data))); ok {
			return cpus
		}
	}
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus
}

func parseCPUList(s string) ([]int, bool) {
	var cpus []int
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		first, err1 := strconv.Atoi(lo)
		last, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || last < first || last-first > math.MaxInt16 {
			return nil, false
		}
		for cpu := first; cpu <= last; cpu++ {
			cpus = append(cpus, cpu)
		}
	}
	return cpus, true
}

// maskedPaths are the default masked paths, none with procMount Unmasked.
func maskedPaths(pm *corev1.ProcMountType) []string {
	if pm != nil && *pm == corev1.UnmaskedProcMount {
		return []string{}
	}
	return defaultMaskedPaths()
}

// readonlyPaths are the default read-only paths, none with procMount Unmasked.
func readonlyPaths(pm *corev1.ProcMountType) []string {
	if pm != nil && *pm == corev1.UnmaskedProcMount {
		return []string{}
	}
	return defaultReadonlyPaths
}
