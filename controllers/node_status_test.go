package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/machine"
)

// With localStorageCapacityIsolation off the node has no ephemeral-storage capacity or allocatable, as the
// kubelet's; with it on, the root dir's filesystem less the hard nodefs threshold.
func TestEphemeralStorageCapacityFollowsIsolation(t *testing.T) {
	o := observation{info: machine.Info{NumCPU: 4, MemoryBytes: 8 << 30}, signals: machine.Signals{NodeFsCapacityBytes: 100 << 30}}
	on := &NodeReconciler{MaxPods: 110}
	if c := on.capacity(o); c.StorageEphemeral().Value() != 100<<30 {
		t.Errorf("capacity %v, want 100Gi of ephemeral-storage", c)
	}
	off := &NodeReconciler{MaxPods: 110, NoEphemeralStorage: true}
	c := off.capacity(o)
	alloc := off.allocatable(c)
	if _, ok := c[corev1.ResourceEphemeralStorage]; ok {
		t.Errorf("capacity %v has ephemeral-storage with localStorageCapacityIsolation off", c)
	}
	if _, ok := alloc[corev1.ResourceEphemeralStorage]; ok {
		t.Errorf("allocatable %v has ephemeral-storage with localStorageCapacityIsolation off", alloc)
	}
	if len(c) != 3 {
		t.Errorf("capacity %v, want cpu, memory and pods", c)
	}
}

// The node's capacity is shared: an extended resource someone else advertised (an operator patching the
// node's status, a device plugin) stays through every status the agent writes, with its allocatable equal to
// its capacity, as the kubelet's MachineInfo setter keeps it; once it leaves capacity it leaves allocatable.
// The measured resources are the agent's and follow the machine.
func TestCapacityKeepsExtendedResourcesOfOthers(t *testing.T) {
	o := observation{info: machine.Info{NumCPU: 4, MemoryBytes: 8 << 30}, signals: machine.Signals{NodeFsCapacityBytes: 100 << 30}}
	r := &NodeReconciler{MaxPods: 110}
	current := corev1.NodeStatus{
		Capacity: corev1.ResourceList{"example.com/foo": resource.MustParse("4"), corev1.ResourceCPU: resource.MustParse("64"),
			"hugepages-1Gi": resource.MustParse("2Gi")},
		Allocatable: corev1.ResourceList{"example.com/foo": resource.MustParse("4"), "example.com/gone": resource.MustParse("1")},
	}
	s := r.nodeStatus(current, o, nil, metav1.Now())
	if q := s.Capacity["example.com/foo"]; q.Value() != 4 {
		t.Errorf("capacity %v lost example.com/foo", s.Capacity)
	}
	if q := s.Allocatable["example.com/foo"]; q.Value() != 4 {
		t.Errorf("allocatable %v, want example.com/foo 4 (its capacity)", s.Allocatable)
	}
	if _, ok := s.Allocatable["example.com/gone"]; ok {
		t.Errorf("allocatable %v keeps example.com/gone, which capacity no longer has", s.Allocatable)
	}
	if s.Capacity.Cpu().Value() != 4 {
		t.Errorf("capacity cpu %v, want the machine's 4", s.Capacity.Cpu())
	}
	if _, ok := s.Capacity["hugepages-1Gi"]; ok {
		t.Errorf("capacity %v keeps hugepages-1Gi, which the machine does not have", s.Capacity)
	}
	delete(current.Capacity, "example.com/foo")
	s = r.nodeStatus(current, o, nil, metav1.Now())
	if _, ok := s.Allocatable["example.com/foo"]; ok {
		t.Errorf("allocatable %v keeps example.com/foo after it left capacity", s.Allocatable)
	}
}

// fakeDevices reports fixed device plugin resources.
type fakeDevices struct {
	capacity, allocatable corev1.ResourceList
	deleted               []string
}

func (f fakeDevices) Capacity() (corev1.ResourceList, corev1.ResourceList, []string) {
	return f.capacity, f.allocatable, f.deleted
}

// The device plugins' resources: capacity counts all their devices, allocatable the healthy ones; a
// resource whose plugin is gone for good stays in capacity at zero, as the kubelet leaves it.
func TestDevicePluginResources(t *testing.T) {
	o := observation{info: machine.Info{NumCPU: 4, MemoryBytes: 8 << 30}, signals: machine.Signals{NodeFsCapacityBytes: 100 << 30}}
	r := &NodeReconciler{MaxPods: 110, Devices: fakeDevices{
		capacity:    corev1.ResourceList{"example.com/gpu": resource.MustParse("2")},
		allocatable: corev1.ResourceList{"example.com/gpu": resource.MustParse("1")},
		deleted:     []string{"example.com/old"},
	}}
	current := corev1.NodeStatus{Capacity: corev1.ResourceList{"example.com/old": resource.MustParse("3"), "example.com/foo": resource.MustParse("4")}}
	s := r.nodeStatus(current, o, nil, metav1.Now())
	for name, want := range map[corev1.ResourceName][2]int64{"example.com/gpu": {2, 1}, "example.com/old": {0, 0}, "example.com/foo": {4, 4}} {
		c, a := s.Capacity[name], s.Allocatable[name]
		if c.Value() != want[0] || a.Value() != want[1] {
			t.Errorf("%s: capacity %v allocatable %v, want %d and %d", name, c.String(), a.String(), want[0], want[1])
		}
		if _, ok := s.Capacity[name]; !ok {
			t.Errorf("%s left capacity", name)
		}
	}
}

func TestRuntimeHandlersByNameAndNodeFeatures(t *testing.T) {
	s := &runtimeapi.StatusResponse{
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{
			{Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}},
			{Name: ""},
		},
	}
	got := runtimeHandlers(s)
	if len(got) != 2 || got[0].Name != "" || got[1].Name != "runc" {
		t.Fatalf("handlers %v, want the default first", got)
	}
	if f := got[0].Features; f == nil || f.UserNamespaces == nil || *f.UserNamespaces || f.RecursiveReadOnlyMounts == nil {
		t.Errorf("a handler without features: %v, want both false", f)
	}
	if !*got[1].Features.UserNamespaces {
		t.Error("runc's user namespace support lost")
	}
	current := &corev1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)}
	if nodeFeatures(s, current) != current {
		t.Error("a runtime that reports no features changed the node's")
	}
	s.Features = &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: false}
	if f := nodeFeatures(s, current); f.SupplementalGroupsPolicy == nil || *f.SupplementalGroupsPolicy {
		t.Errorf("features %v, want supplementalGroupsPolicy false", f)
	}
}

// The node's system info says whether the agent runs in a user namespace (with the KubeletInUserNamespace gate,
// else not at all) and, on a host with swap, its size, as the kubelet's MachineInfo setter does.
func TestNodeInfoReportsUserNamespaceAndSwap(t *testing.T) {
	o := observation{info: machine.Info{NumCPU: 4, MemoryBytes: 8 << 30, SwapBytes: 2 << 30, InUserNamespace: true}}
	s := (&NodeReconciler{MaxPods: 110, ReportUserNamespace: true}).nodeStatus(corev1.NodeStatus{}, o, nil, metav1.Now())
	if v := s.NodeInfo.RunningInUserNamespace; v == nil || !*v {
		t.Errorf("runningInUserNamespace %v, want true", v)
	}
	if sw := s.NodeInfo.Swap; sw == nil || ptr.Deref(sw.Capacity, 0) != 2<<30 {
		t.Errorf("swap %v, want a capacity of 2Gi", sw)
	}
	o.info.SwapBytes, o.info.InUserNamespace = 0, false
	s = (&NodeReconciler{MaxPods: 110, ReportUserNamespace: true}).nodeStatus(corev1.NodeStatus{}, o, nil, metav1.Now())
	if v := s.NodeInfo.RunningInUserNamespace; v == nil || *v {
		t.Errorf("runningInUserNamespace %v, want false", v)
	}
	if s.NodeInfo.Swap != nil {
		t.Errorf("swap %v on a host without swap", s.NodeInfo.Swap)
	}
	s = (&NodeReconciler{MaxPods: 110}).nodeStatus(corev1.NodeStatus{}, o, nil, metav1.Now())
	if s.NodeInfo.RunningInUserNamespace != nil {
		t.Error("runningInUserNamespace set with the KubeletInUserNamespace gate off")
	}
}

// The node's containerRuntimeVersion is the kubelet's: the runtime's version parsed and printed back.
func TestRuntimeVersionIsTheKubelets(t *testing.T) {
	for in, want := range map[string]string{
		"v2.4.2": "2.4.2", "1.6.20": "1.6.20", "1.6.20~ds1": "1.6.20", "v1.7.0-rc.1": "1.7.0-rc.1", "1.2": "1.2", "nonsense": "Unknown",
	} {
		if got := runtimeVersion(in); got != want {
			t.Errorf("runtimeVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
