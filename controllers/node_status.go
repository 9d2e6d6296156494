package controllers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/podrules"
)

// maxNamesPerImage is how many names of one image the node status lists, as in the kubelet.
const maxNamesPerImage = 5

// thresholdValue returns a threshold in the signal's unit given the capacity a percentage is taken of.
func thresholdValue(t config.Threshold, capacity int64) int64 {
	if t.Quantity != nil {
		return t.Quantity.Value()
	}
	return int64(t.Percentage * float64(capacity))
}

// observation is what one evaluation of the node saw.
type observation struct {
	info          machine.Info
	signals       machine.Signals
	version       *runtimeapi.VersionResponse
	runtimeStatus *runtimeapi.StatusResponse
	runtimeErr    error
	images        []*runtimeapi.Image
	healthErrs    []error
}

// capacity is the node's resources before reservations; ephemeral-storage (the root dir's filesystem)
// only with localStorageCapacityIsolation.
func (r *NodeReconciler) capacity(o observation) corev1.ResourceList {
	c := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(o.info.NumCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(o.info.MemoryBytes, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(r.MaxPods, resource.DecimalSI),
	}
	if !r.NoEphemeralStorage {
		c[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(o.signals.NodeFsCapacityBytes, resource.BinarySI)
	}
	for size, bytes := range o.info.HugePages {
		name := corev1.ResourceName(corev1.ResourceHugePagesPrefix + resource.NewQuantity(size, resource.BinarySI).String())
		c[name] = *resource.NewQuantity(bytes, resource.BinarySI)
	}
	return c
}

// mergedCapacity is the node's capacity as the kubelet's MachineInfo setter writes it: the resources the
// agent measures (cpu, memory, pods, ephemeral-storage, huge pages) set from what it saw, the device plugins'
// resources from the device manager (a resource whose plugin is gone for good stays, at zero, as the kubelet
// leaves it), and every other key of the current capacity — an extended resource an operator advertised —
// kept. devAlloc is the device plugins' allocatable (their healthy devices).
func (r *NodeReconciler) mergedCapacity(current corev1.ResourceList, o observation) (c, devAlloc corev1.ResourceList) {
	c = corev1.ResourceList{}
	for name, q := range current {
		if !ownedResource(name) {
			c[name] = q.DeepCopy()
		}
	}
	for name, q := range r.capacity(o) {
		c[name] = q
	}
	if r.Devices == nil {
		return c, nil
	}
	devCap, devAlloc, deleted := r.Devices.Capacity()
	for name, q := range devCap {
		c[name] = q
	}
	for _, name := range deleted {
		c[corev1.ResourceName(name)] = *resource.NewQuantity(0, resource.DecimalSI)
	}
	return c, devAlloc
}

// ownedResource reports whether the agent measures a resource of the node's capacity itself: the native
// ones and the huge pages. Any other name (example.com/foo, nvidia.com/gpu) is someone else's to set.
func ownedResource(name corev1.ResourceName) bool {
	return !podrules.IsExtendedResourceName(name)
}

// allocatable is capacity minus system and kube reservations and the hard eviction thresholds, never
// below zero (the kubelet's rule). Memory also loses what hugepages take. An extended resource's allocatable
// is its capacity, as the kubelet sets it; a resource no longer in capacity leaves allocatable.
func (r *NodeReconciler) allocatable(capacity corev1.ResourceList) corev1.ResourceList {
	alloc := corev1.ResourceList{}
	for name, q := range capacity {
		v := q.DeepCopy()
		if res, ok := r.Reserved[name]; ok {
			v.Sub(res)
		}
		if ev := r.evictionReserve(name, q.Value()); ev > 0 {
			v.Sub(*resource.NewQuantity(ev, q.Format))
		}
		if name == corev1.ResourceMemory {
			for hn, hq := range capacity {
				if len(hn) > len(corev1.ResourceHugePagesPrefix) && hn[:len(corev1.ResourceHugePagesPrefix)] == corev1.ResourceHugePagesPrefix {
					v.Sub(hq)
				}
			}
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		alloc[name] = v
	}
	return alloc
}

// evictionReserve is what a hard eviction threshold holds back from a resource's allocatable.
func (r *NodeReconciler) evictionReserve(name corev1.ResourceName, capacity int64) int64 {
	signal := map[corev1.ResourceName]string{
		corev1.ResourceMemory:           config.SignalMemoryAvailable,
		corev1.ResourceEphemeralStorage: config.SignalNodeFsAvailable,
	}[name]
	for _, t := range r.HardEviction {
		if signal != "" && t.Signal == signal {
			return thresholdValue(t, capacity)
		}
	}
	return 0
}

// conditionText holds the kubelet's reason and message for a condition in each state.
type conditionText struct{ trueReason, trueMsg, falseReason, falseMsg, trueEvent, falseEvent string }

var pressureTexts = map[corev1.NodeConditionType]conditionText{
	corev1.NodeMemoryPressure: {"KubeletHasInsufficientMemory", "kubelet has insufficient memory available",
		"KubeletHasSufficientMemory", "kubelet has sufficient memory available",
		"NodeHasInsufficientMemory", "NodeHasSufficientMemory"},
	corev1.NodeDiskPressure: {"KubeletHasDiskPressure", "kubelet has disk pressure",
		"KubeletHasNoDiskPressure", "kubelet has no disk pressure",
		"NodeHasDiskPressure", "NodeHasNoDiskPressure"},
	corev1.NodePIDPressure: {"KubeletHasInsufficientPID", "kubelet has insufficient PID available",
		"KubeletHasSufficientPID", "kubelet has sufficient PID available",
		"NodeHasInsufficientPID", "NodeHasSufficientPID"},
}

// conditionOrder is the order in which the kubelet lists node conditions.
var conditionOrder = []corev1.NodeConditionType{
	corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady,
}

// readinessErrors lists why the node is not ready, in the kubelet's words.
func readinessErrors(o observation) []error {
	var errs []error
	if o.runtimeErr != nil {
		errs = append(errs, fmt.Errorf("container runtime is down: %w", o.runtimeErr))
	}
	errs = append(errs, o.healthErrs...)
	if o.runtimeStatus != nil {
		if c := findRuntimeCondition(o.runtimeStatus, runtimeapi.RuntimeReady); c == nil || !c.Status {
			errs = append(errs, fmt.Errorf("container runtime not ready: %s", formatRuntimeCondition(runtimeapi.RuntimeReady, c)))
		}
		if c := findRuntimeCondition(o.runtimeStatus, runtimeapi.NetworkReady); c == nil || !c.Status {
			errs = append(errs, fmt.Errorf("container runtime network not ready: %s", formatRuntimeCondition(runtimeapi.NetworkReady, c)))
		}
	}
	return errs
}

func findRuntimeCondition(s *runtimeapi.StatusResponse, t string) *runtimeapi.RuntimeCondition {
	for _, c := range s.GetStatus().GetConditions() {
		if c.Type == t {
			return c
		}
	}
	return nil
}

// formatRuntimeCondition prints a condition the way the kubelet does ("NetworkReady=false reason:... message:...").
func formatRuntimeCondition(t string, c *runtimeapi.RuntimeCondition) string {
	if c == nil {
		return t + "=false reason: message:condition not reported by the runtime"
	}
	return t + "=" + strconv.FormatBool(c.Status) + " reason:" + c.Reason + " message:" + c.Message
}

// desiredConditions computes the node's conditions; times are filled in by mergeConditions.
func (r *NodeReconciler) desiredConditions(o observation, pressure map[corev1.NodeConditionType]bool) []corev1.NodeCondition {
	var out []corev1.NodeCondition
	for _, t := range conditionOrder[:3] {
		txt := pressureTexts[t]
		c := corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: txt.falseReason, Message: txt.falseMsg}
		if pressure[t] {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, txt.trueReason, txt.trueMsg
		}
		out = append(out, c)
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "KubeletReady", Message: "kubelet is posting ready status"}
	if errs := readinessErrors(o); len(errs) > 0 {
		ready.Status, ready.Reason, ready.Message = corev1.ConditionFalse, "KubeletNotReady", utilerrors.NewAggregate(errs).Error()
	}
	return append(out, ready)
}

// mergeConditions keeps the transition time of conditions whose status did not change and stamps the
// heartbeat with now. Conditions the agent does not own (set by others) are kept as they are.
func mergeConditions(existing, desired []corev1.NodeCondition, now metav1.Time) []corev1.NodeCondition {
	old := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range existing {
		old[c.Type] = c
	}
	owned := map[corev1.NodeConditionType]bool{}
	out := make([]corev1.NodeCondition, 0, len(desired)+len(existing))
	for _, c := range desired {
		owned[c.Type] = true
		c.LastHeartbeatTime, c.LastTransitionTime = now, now
		if prev, ok := old[c.Type]; ok && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		}
		out = append(out, c)
	}
	for _, c := range existing {
		if !owned[c.Type] {
			out = append(out, c)
		}
	}
	return out
}

// addresses are the node's InternalIP(s) and Hostname.
func (r *NodeReconciler) addresses() []corev1.NodeAddress {
	out := make([]corev1.NodeAddress, 0, len(r.NodeIPs)+1)
	for _, ip := range r.NodeIPs {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip.String()})
	}
	return append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: r.Hostname})
}

// nodeImages lists the largest images first, at most MaxImages (-1: all), with at most five names each.
func (r *NodeReconciler) nodeImages(images []*runtimeapi.Image) []corev1.ContainerImage {
	sorted := append([]*runtimeapi.Image(nil), images...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Size > sorted[j].Size })
	out := make([]corev1.ContainerImage, 0, len(sorted))
	for _, img := range sorted {
		if r.MaxImages >= 0 && int32(len(out)) >= r.MaxImages {
			break
		}
		names := append(append([]string{}, img.RepoDigests...), img.RepoTags...)
		if len(names) == 0 {
			continue
		}
		if len(names) > maxNamesPerImage {
			names = names[:maxNamesPerImage]
		}
		out = append(out, corev1.ContainerImage{Names: names, SizeBytes: int64(img.Size)})
	}
	return out
}

// runtimeHandlers reports the handlers the runtime announces, with their features, by name (the default
// handler "" first), as the kubelet.
func runtimeHandlers(s *runtimeapi.StatusResponse) []corev1.NodeRuntimeHandler {
	var out []corev1.NodeRuntimeHandler
	for _, h := range s.GetRuntimeHandlers() {
		rro, uns := h.GetFeatures().GetRecursiveReadOnlyMounts(), h.GetFeatures().GetUserNamespaces()
		out = append(out, corev1.NodeRuntimeHandler{Name: h.Name,
			Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &rro, UserNamespaces: &uns}})
	}
	slices.SortStableFunc(out, func(a, b corev1.NodeRuntimeHandler) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// nodeFeatures are the node's features the runtime supports (status.features), or current when the
// runtime reports none, as the kubelet.
func nodeFeatures(s *runtimeapi.StatusResponse, current *corev1.NodeFeatures) *corev1.NodeFeatures {
	f := s.GetFeatures()
	if f == nil {
		return current
	}
	sgp := f.GetSupplementalGroupsPolicy()
	return &corev1.NodeFeatures{SupplementalGroupsPolicy: &sgp}
}

// nodeStatus computes the status the node should have now, given the current one.
func (r *NodeReconciler) nodeStatus(current corev1.NodeStatus, o observation, pressure map[corev1.NodeConditionType]bool, now metav1.Time) corev1.NodeStatus {
	s := *current.DeepCopy()
	var devAlloc corev1.ResourceList
	s.Capacity, devAlloc = r.mergedCapacity(current.Capacity, o)
	s.Allocatable = r.allocatable(s.Capacity)
	for name, q := range devAlloc {
		s.Allocatable[name] = q
	}
	s.Conditions = mergeConditions(current.Conditions, r.desiredConditions(o, pressure), now)
	s.Addresses = r.addresses()
	s.DaemonEndpoints.KubeletEndpoint.Port = r.Port
	s.NodeInfo = corev1.NodeSystemInfo{
		MachineID: o.info.MachineID, SystemUUID: o.info.SystemUUID, BootID: o.info.BootID,
		KernelVersion: o.info.KernelVersion, OSImage: o.info.OSImage,
		OperatingSystem: o.info.OS, Architecture: o.info.Architecture,
		KubeletVersion: r.KubeletVersion, ContainerRuntimeVersion: current.NodeInfo.ContainerRuntimeVersion,
	}
	if o.info.SwapBytes != 0 {
		s.NodeInfo.Swap = &corev1.NodeSwapStatus{Capacity: ptr.To(o.info.SwapBytes)}
	}
	if r.ReportUserNamespace {
		s.NodeInfo.RunningInUserNamespace = ptr.To(o.info.InUserNamespace)
	}
	if o.version != nil {
		s.NodeInfo.ContainerRuntimeVersion = o.version.RuntimeName + "://" + runtimeVersion(o.version.RuntimeVersion)
	}
	if o.runtimeErr == nil {
		s.Images = r.nodeImages(o.images)
		s.RuntimeHandlers = runtimeHandlers(o.runtimeStatus)
		s.Features = nodeFeatures(o.runtimeStatus, s.Features)
	}
	if r.Volumes != nil {
		s.VolumesInUse = r.Volumes.VolumesInUse()
	}
	s.DeclaredFeatures = r.DeclaredFeatures
	return s
}

// statusChanged compares two statuses ignoring condition heartbeats, as the kubelet does to decide
// whether a write is due before the report period ends.
func statusChanged(a, b corev1.NodeStatus) bool {
	strip := func(s corev1.NodeStatus) corev1.NodeStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return s
	}
	sa, sb := strip(a), strip(b)
	return !equalStatus(&sa, &sb)
}

// observe gathers everything one evaluation needs. A runtime that does not answer is an observation,
// not an error: the node then reports NotReady with the runtime's error.
func (r *NodeReconciler) observe(ctx context.Context) (observation, error) {
	var o observation
	var err error
	if o.info, err = r.Machine.Info(); err != nil {
		return o, fmt.Errorf("read machine info: %w", err)
	}
	if o.signals, err = r.Machine.Signals(); err != nil {
		return o, fmt.Errorf("read eviction signals: %w", err)
	}
	o.version, o.runtimeErr = r.Runtime.Version(ctx)
	if o.runtimeErr == nil {
		o.runtimeStatus, o.runtimeErr = r.Runtime.Status(ctx, false)
	}
	if o.runtimeErr == nil {
		if o.images, err = r.Runtime.ListImages(ctx, nil); err != nil {
			o.runtimeErr = err
		}
	}
	for _, hc := range r.HealthChecks {
		if err := hc.Check(); err != nil {
			o.healthErrs = append(o.healthErrs, fmt.Errorf("%s is not healthy: %w", hc.Name, err))
		}
	}
	for _, check := range r.NotReady {
		if err := check(); err != nil {
			o.healthErrs = append(o.healthErrs, err)
		}
	}
	return o, nil
}

// errNoNodeIP is returned when no usable InternalIP was configured or detected.
var errNoNodeIP = errors.New("no node IP")

// DetectNodeIP picks the node's address as the kubelet does without --node-ip: the first non-loopback
// address the hostname resolves to, else the address of the default route's interface.
func DetectNodeIP(hostname string, lookup func(string) ([]net.IP, error), hostIface func() (net.IP, error)) (net.IP, error) {
	if ips, err := lookup(hostname); err == nil {
		for _, ip := range ips {
			if !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsUnspecified() {
				return ip, nil
			}
		}
	}
	if ip, err := hostIface(); err == nil && ip != nil {
		return ip, nil
	}
	return nil, fmt.Errorf("%w: %s resolves only to loopback and no default route interface has an address", errNoNodeIP, hostname)
}

// runtimeVersion is the runtime's version as the kubelet writes it in the node's containerRuntimeVersion:
// parsed as a semantic version, else as a generic one, and printed back ("v2.4.2" becomes "2.4.2");
// "Unknown" when it is neither.
func runtimeVersion(v string) string {
	parsed, err := utilversion.ParseSemantic(v)
	if err != nil {
		if parsed, err = utilversion.ParseGeneric(v); err != nil {
			return "Unknown"
		}
	}
	return parsed.String()
}
