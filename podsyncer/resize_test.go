package podsyncer

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
)

// resizeLog records pod cgroup writes and container updates, in order; the container uses usage bytes.
type resizeLog struct {
	cgroupLog
	usage uint64
}

func (c *resizeLog) Ensure(parent string, res podrules.PodCgroup) error {
	c.add(fmt.Sprintf("pod cgroup quota=%d memory=%dMi", *res.CPUQuota, *res.MemoryLimit>>20))
	return nil
}

func (c *resizeLog) UpdateContainerResources(_ context.Context, id string, r *runtimeapi.LinuxContainerResources) error {
	c.add(fmt.Sprintf("update %s quota=%d memory=%dMi", id, r.CpuQuota, r.MemoryLimitInBytes>>20))
	return nil
}

func (c *resizeLog) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return []*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Metadata: &runtimeapi.ContainerMetadata{Name: "app"}},
		Memory:     &runtimeapi.MemoryUsage{UsageBytes: &runtimeapi.UInt64Value{Value: c.usage}},
	}}, nil
}

func (c *resizeLog) ReadContainer(_ context.Context, id, sandboxID string) (*runtime.ContainerStatus, error) {
	return &runtime.ContainerStatus{ID: id, Name: "app", SandboxID: sandboxID, State: runtimeapi.ContainerState_CONTAINER_RUNNING}, nil
}

func guaranteed(cpu, memory string) corev1.ResourceRequirements {
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	return corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
}

// resizeScope is a running Guaranteed pod admitted with 100m and 100Mi, now allocated cpu and memory.
func resizeScope(t *testing.T, s *Syncer, cpu, memory string) (*Scope, []resizeUpdate) {
	t.Helper()
	pod := cgroupPod()
	pod.Spec.Containers[0].Resources = guaranteed("100m", "100Mi")
	if err := s.resize.actuation.SetActuated(pod, &pod.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	pod = pod.DeepCopy()
	pod.Spec.Containers[0].Resources = guaranteed(cpu, memory)
	st := &runtime.PodStatus{
		Sandboxes:  []*runtimeapi.PodSandboxStatus{{Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		Containers: []*runtime.ContainerStatus{{ID: "c1", Name: "app", SandboxID: "sb1", State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
	}
	kills, updates := resizeActions(pod, st, s.resize.actuation, nil)
	if len(kills) != 0 || len(updates) != 1 {
		t.Fatalf("resizeActions = %d kills, %d updates; want one update", len(kills), len(updates))
	}
	return &Scope{Pod: pod, State: NewPodState(pod.UID, types.NamespacedName{}), Runtime: st}, updates
}

// As the kubelet's doPodResizeAction: the pod cgroup is raised first, memory is applied before cpu, and
// the pod cgroup is lowered last.
func TestResizeRaisesThePodCgroupFirstAndLowersItLast(t *testing.T) {
	cg := &resizeLog{usage: 10 << 20}
	s, _ := cgroupReconciler(t, &cg.cgroupLog)
	s.resize.cri, s.cgroups.podCgroups = cg, cg
	sc, updates := resizeScope(t, s, "200m", "50Mi")
	if err := s.resize.phase(context.Background(), sc, false, updates); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"pod cgroup quota=20000 memory=100Mi", // the larger of before and after
		"update c1 quota=10000 memory=50Mi",   // memory first, cpu as it was
		"update c1 quota=20000 memory=50Mi",
		"pod cgroup quota=20000 memory=50Mi",
	}, ", ")
	if got := cg.entries(); got != want {
		t.Errorf("calls:\n%s\nwant:\n%s", got, want)
	}
	if r := resizeReport(sc.Pod, sc.Runtime, s.resize.actuation, nil); r.InProgress {
		t.Error("InProgress after the resize was applied")
	}
}

// A memory limit below what the container (and so the pod) uses now is refused before anything is applied.
func TestResizeRefusesAMemoryLimitBelowUsage(t *testing.T) {
	cg := &resizeLog{usage: 80 << 20}
	s, _ := cgroupReconciler(t, &cg.cgroupLog)
	s.resize.cri, s.cgroups.podCgroups = cg, cg
	sc, updates := resizeScope(t, s, "100m", "50Mi")
	err := s.resize.phase(context.Background(), sc, false, updates)
	want := fmt.Sprintf(`cannot decrease memory limits: [attempting to set pod memory limit (%d) below current usage (%d), `+
		`attempting to set container "app" memory limit (%d) below current usage (%d)]`, 50<<20, 80<<20, 50<<20, 80<<20)
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

// A change of a resource whose resizePolicy is RestartContainer restarts the container; a change of the
// other one alone is applied in place.
func TestResizePolicyRestartContainer(t *testing.T) {
	s := newTestSyncer(t, Deps{}, Options{})
	pod := cgroupPod()
	pod.Spec.Containers[0].Resources = guaranteed("100m", "100Mi")
	pod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	if err := s.resize.actuation.SetActuated(pod, &pod.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	st := &runtime.PodStatus{Containers: []*runtime.ContainerStatus{{ID: "c1", Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING}}}
	for _, tc := range []struct {
		cpu, memory   string
		kills, update int
	}{{"200m", "100Mi", 0, 1}, {"100m", "200Mi", 1, 0}, {"200m", "200Mi", 1, 0}, {"100m", "100Mi", 0, 0}} {
		p := pod.DeepCopy()
		p.Spec.Containers[0].Resources = guaranteed(tc.cpu, tc.memory)
		kills, updates := resizeActions(p, st, s.resize.actuation, nil)
		if len(kills) != tc.kills || len(updates) != tc.update {
			t.Errorf("%s/%s: %d kills, %d updates; want %d, %d", tc.cpu, tc.memory, len(kills), len(updates), tc.kills, tc.update)
		}
		if len(kills) == 1 && kills[0].message != "Container app resize requires restart" {
			t.Errorf("kill message %q", kills[0].message)
		}
	}
}
