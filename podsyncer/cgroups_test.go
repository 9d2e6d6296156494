package podsyncer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// cgroupLog records what the pod reconciler asks of the pod cgroups and the runtime, in order.
type cgroupLog struct {
	Runtime
	mu        sync.Mutex
	log       []string
	ensureErr error
	listed    []types.UID
}

func (c *cgroupLog) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, s)
}

func (c *cgroupLog) entries() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.log, ", ")
}

func (c *cgroupLog) Ensure(parent string, _ podrules.PodCgroup) error {
	c.add("ensure " + parent)
	return c.ensureErr
}
func (c *cgroupLog) UpdateQoS(milliCPU int64) error {
	c.add(fmt.Sprintf("qos %dm", milliCPU))
	return nil
}
func (c *cgroupLog) Remove(uid types.UID) error { c.add("remove " + string(uid)); return nil }
func (c *cgroupLog) List() []types.UID          { return c.listed }

func (c *cgroupLog) RunPodSandbox(_ context.Context, cfg *runtimeapi.PodSandboxConfig, _ string) (string, error) {
	c.add("run sandbox " + cfg.GetLinux().GetCgroupParent())
	return "sb1", nil
}

func (c *cgroupLog) RemovePodSandbox(_ context.Context, id string) error {
	c.add("remove sandbox " + id)
	return nil
}
func (c *cgroupLog) RemoveContainer(_ context.Context, id string) error {
	c.add("remove container " + id)
	return nil
}

func cgroupReconciler(t *testing.T, cg *cgroupLog) (*Syncer, *record.FakeRecorder) {
	t.Helper()
	rec := record.NewFakeRecorder(10)
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	r := newTestSyncer(t, Deps{Runtime: cg, PodCgroups: cg, Recorder: rec, Clock: clk},
		Options{Sandbox: podconfig.SandboxOptions{CgroupsPerQOS: true, CgroupDriver: "cgroupfs", CgroupRoot: "/", PodLogsDir: t.TempDir()}})
	return r, rec
}

func cgroupPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "1234-abcd"},
		Spec: corev1.PodSpec{DNSPolicy: corev1.DNSDefault, Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
}

func TestPodCgroupIsMadeBeforeTheSandbox(t *testing.T) {
	cg := &cgroupLog{}
	r, _ := cgroupReconciler(t, cg)
	id, _, err := r.createSandbox(context.Background(), NewPodState("1234-abcd", types.NamespacedName{}), cgroupPod(), 0)
	if err != nil || id == "" {
		t.Fatalf("createSandbox = %q, %v", id, err)
	}
	// The QoS cgroups first (no Burstable pod admitted: 0m), then the pod cgroup, then the sandbox.
	want := "qos 0m, ensure /kubepods/besteffort/pod1234-abcd, run sandbox /kubepods/besteffort/pod1234-abcd"
	if got := cg.entries(); got != want {
		t.Errorf("calls %q, want %q", got, want)
	}
}

func TestPodCgroupFailureStopsTheSandboxAsTheKubelet(t *testing.T) {
	cg := &cgroupLog{ensureErr: errors.New("permission denied")}
	r, rec := cgroupReconciler(t, cg)
	id, retry, err := r.createSandbox(context.Background(), NewPodState("1234-abcd", types.NamespacedName{}), cgroupPod(), 0)
	if err != nil || id != "" || retry <= 0 {
		t.Fatalf("createSandbox = %q, %v, %v; want not created, retried later", id, retry, err)
	}
	if got := cg.entries(); strings.Contains(got, "run sandbox") {
		t.Errorf("the sandbox ran without its pod cgroup: %q", got)
	}
	select {
	case ev := <-rec.Events:
		if ev != "Warning FailedCreatePodContainer unable to ensure pod container exists: permission denied" {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no event")
	}
}

func TestPodCgroupIsRemovedAfterTheSandboxes(t *testing.T) {
	cg := &cgroupLog{}
	r, _ := cgroupReconciler(t, cg)
	ps := NewPodState("1234-abcd", types.NamespacedName{Namespace: "default", Name: "web"})
	st := &runtime.PodStatus{UID: ps.UID, Sandboxes: []*runtimeapi.PodSandboxStatus{{Id: "sb1"}},
		Containers: []*runtime.ContainerStatus{{ID: "c1"}}}
	if err := r.RemovePod(context.Background(), &Scope{State: ps, Runtime: st}); err != nil {
		t.Fatal(err)
	}
	if got, want := cg.entries(), "remove container c1, remove sandbox sb1, remove 1234-abcd"; got != want {
		t.Errorf("calls %q, want %q", got, want)
	}
}
