package probes

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestSimulate(t *testing.T) {
	changed := make(chan types.NamespacedName, 10)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "held"},
			{Name: "web", ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				TCPSocket: &corev1.TCPSocketAction{}}, PeriodSeconds: 1}},
		}}}
	m := &Manager{
		Simulate: func(_ *corev1.Pod, c, kind string) bool { return c != "held" || kind != "Readiness" },
		OnChange: func(k types.NamespacedName) { changed <- k },
	}
	m.Sync(pod, nil, []ContainerInfo{{Name: "held", ID: "c1", Running: true}, {Name: "web", ID: "c2", Running: true}})
	defer m.RemovePod("u1")
	if ready, known := m.Ready("c1"); ready || !known {
		t.Errorf("held container without a readiness probe: ready %v known %v, want held unready", ready, known)
	}
	select {
	case <-changed: // the simulated TCP probe succeeded without a network
	case <-time.After(10 * time.Second):
		t.Fatal("the simulated readiness probe gave no result")
	}
	if ready, known := m.Ready("c2"); !ready || !known {
		t.Errorf("simulated readiness probe: ready %v known %v, want ready", ready, known)
	}
}
