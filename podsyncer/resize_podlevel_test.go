package podsyncer

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
)

// podLevelScope is a running pod whose pod-level resources were applied as before (its container sets
// none), now allocated after.
func podLevelScope(t *testing.T, s *Syncer, before, after corev1.ResourceRequirements) *Scope {
	t.Helper()
	pod := cgroupPod()
	pod.Spec.Resources = before.DeepCopy()
	if err := s.resize.actuation.SetActuated(pod, &pod.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.resize.actuation.SetActuatedPodLevel(pod); err != nil {
		t.Fatal(err)
	}
	pod = pod.DeepCopy()
	pod.Spec.Resources = after.DeepCopy()
	st := &runtime.PodStatus{
		Sandboxes:  []*runtimeapi.PodSandboxStatus{{Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		Containers: []*runtime.ContainerStatus{{ID: "c1", Name: "app", SandboxID: "sb1", State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
	}
	return &Scope{Pod: pod, State: NewPodState(pod.UID, types.NamespacedName{}), Runtime: st}
}

// A pod-level resize reaches the containers that take their limits from the pod (as the kubelet's
// GetLimits) and the pod cgroup, raised before the containers and lowered after; the pod-level resources are
// then recorded as applied and the resize is no longer in progress.
func TestPodLevelResizeAppliesThePodCgroupAndItsContainers(t *testing.T) {
	cg := &resizeLog{usage: 10 << 20}
	s, _ := cgroupReconciler(t, &cg.cgroupLog)
	s.resize.cri, s.cgroups.podCgroups = cg, cg
	sc := podLevelScope(t, s, guaranteed("100m", "100Mi"), guaranteed("200m", "50Mi"))
	if r := resizeReport(sc.Pod, sc.Runtime, s.resize.actuation, nil); !r.InProgress {
		t.Fatal("a pod-level resize not applied yet is not in progress")
	}
	kills, updates := resizeActions(sc.Pod, sc.Runtime, s.resize.actuation, nil)
	if len(kills) != 0 || len(updates) != 1 {
		t.Fatalf("resizeActions = %d kills, %d updates; want the container's limits updated", len(kills), len(updates))
	}
	if err := s.resize.phase(context.Background(), sc, false, updates); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"pod cgroup quota=20000 memory=100Mi",
		"update c1 quota=10000 memory=50Mi",
		"update c1 quota=20000 memory=50Mi",
		"pod cgroup quota=20000 memory=50Mi",
	}, ", ")
	if got := cg.entries(); got != want {
		t.Errorf("calls:\n%s\nwant:\n%s", got, want)
	}
	if r := resizeReport(sc.Pod, sc.Runtime, s.resize.actuation, nil); r.InProgress {
		t.Error("InProgress after the resize was applied")
	}
	got, ok := s.resize.actuation.ActuatedPodLevel(sc.Pod.UID)
	if !ok || got.Limits.Memory().String() != "50Mi" || got.Limits.Cpu().String() != "200m" {
		t.Errorf("actuated pod-level resources %v, %v; want the new ones", got, ok)
	}
}

// A pod-level resize that no container's limits follow (they set their own) changes the pod cgroup alone.
func TestPodLevelResizeOfThePodCgroupAlone(t *testing.T) {
	cg := &resizeLog{usage: 10 << 20}
	s, _ := cgroupReconciler(t, &cg.cgroupLog)
	s.resize.cri, s.cgroups.podCgroups = cg, cg
	sc := podLevelScope(t, s, guaranteed("300m", "300Mi"), guaranteed("400m", "300Mi"))
	sc.Pod.Spec.Containers[0].Resources = guaranteed("100m", "100Mi")
	if err := s.resize.actuation.SetActuated(sc.Pod, &sc.Pod.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	kills, updates := resizeActions(sc.Pod, sc.Runtime, s.resize.actuation, nil)
	if len(kills)+len(updates) != 0 {
		t.Fatalf("resizeActions = %d kills, %d updates; want none", len(kills), len(updates))
	}
	if err := s.resize.phase(context.Background(), sc, false, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := cg.entries(), "pod cgroup quota=40000 memory=300Mi"; got != want {
		t.Errorf("calls %q, want %q", got, want)
	}
	if r := resizeReport(sc.Pod, sc.Runtime, s.resize.actuation, nil); r.InProgress {
		t.Error("InProgress after the resize was applied")
	}
}

// A pod-level memory limit below what the pod uses is refused with the kubelet's message, nothing applied
// and the resize still in progress.
func TestPodLevelResizeRefusesAMemoryLimitBelowUsage(t *testing.T) {
	cg := &resizeLog{usage: 80 << 20}
	s, _ := cgroupReconciler(t, &cg.cgroupLog)
	s.resize.cri, s.cgroups.podCgroups = cg, cg
	sc := podLevelScope(t, s, guaranteed("300m", "300Mi"), guaranteed("300m", "50Mi"))
	sc.Pod.Spec.Containers[0].Resources = guaranteed("100m", "10Mi")
	if err := s.resize.actuation.SetActuated(sc.Pod, &sc.Pod.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	err := s.resize.phase(context.Background(), sc, false, nil)
	want := fmt.Sprintf("cannot decrease memory limits: attempting to set pod memory limit (%d) below current usage (%d)", 50<<20, 80<<20)
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	if got := cg.entries(); got != "" {
		t.Errorf("applied %q, want nothing", got)
	}
	if r := resizeReport(sc.Pod, sc.Runtime, s.resize.actuation, err); !r.InProgress || r.Err == nil {
		t.Errorf("report = %+v, want in progress with the error", r)
	}
}
