package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

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
