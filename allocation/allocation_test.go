package allocation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func pod(uid string, cpu string) *corev1.Pod {
	q := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid, Namespace: "default", Generation: 1},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Resources: corev1.ResourceRequirements{Requests: q, Limits: q.DeepCopy()},
		}}},
	}
}

// The kubelet's own allocated_pods_state (from its checkpoint tests) reads as the kubelet wrote it: a
// takeover keeps what the kubelet admitted.
func TestReadsTheKubeletsCheckpoint(t *testing.T) {
	dir := t.TempDir()
	const kubelets = `{"data":"{\"entries\":{\"pod1\":{\"ContainerResources\":{\"container1\":{\"requests\":{\"cpu\":\"1Ki\",\"memory\":\"1Ki\"}}}}}}","checksum":1178570812}`
	if err := os.WriteFile(filepath.Join(dir, AllocatedStateFile), []byte(kubelets), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := New(dir)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	p := pod("pod1", "1")
	p.Spec.Containers[0].Name = "container1"
	got, changed := m.PodWithAllocation(p)
	if !changed {
		t.Fatal("the pod's spec differs from the kubelet's allocation: want the allocation")
	}
	if cpu := got.Spec.Containers[0].Resources.Requests.Cpu(); cpu.Cmp(resource.MustParse("1Ki")) != 0 {
		t.Errorf("allocated cpu = %v, want 1Ki", cpu)
	}
	if got.Spec.Containers[0].Resources.Limits != nil {
		t.Errorf("allocated limits = %v, want none", got.Spec.Containers[0].Resources.Limits)
	}
}

func TestCorruptCheckpointIsAnError(t *testing.T) {
	dir := t.TempDir()
	bad := `{"data":"{\"entries\":{}}","checksum":1}`
	if err := os.WriteFile(filepath.Join(dir, ActuatedStateFile), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(dir)
	if err == nil || !strings.Contains(err.Error(), ActuatedStateFile) || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("New = %v, want a corrupt checkpoint error naming the file", err)
	}
}

// What is allocated and actuated survives a restart (a new Manager on the same directory), and a resized
// spec is seen through the allocation until the resize is accepted.
func TestRecordsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	m, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := pod("a", "100m")
	if err := m.Allocate(p); err != nil {
		t.Fatal(err)
	}
	if err := m.SetActuated(p, &p.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	resized := pod("a", "300m")
	resized.Generation = 2

	m2, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !m2.ResizeRequested(resized) {
		t.Fatal("ResizeRequested = false after a restart, want true")
	}
	got, _ := m2.PodWithAllocation(resized)
	if cpu := got.Spec.Containers[0].Resources.Requests.Cpu().MilliValue(); cpu != 100 {
		t.Errorf("allocated cpu = %dm, want 100m", cpu)
	}
	if resized.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 300 {
		t.Error("PodWithAllocation changed the pod it was given")
	}
	act, ok := m2.Actuated("a", "app")
	if !ok || act.Limits.Cpu().MilliValue() != 100 {
		t.Errorf("Actuated = %v, %v; want the 100m limit", act, ok)
	}
	if err := m2.Allocate(resized); err != nil {
		t.Fatal(err)
	}
	if m2.ResizeRequested(resized) {
		t.Error("ResizeRequested = true once allocated")
	}
}

// A container without limits of its own runs with the pod-level ones.
func TestEffectiveResourcesTakePodLevelLimits(t *testing.T) {
	p := pod("a", "100m")
	p.Spec.Containers[0].Resources.Limits = nil
	p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	r := EffectiveResources(p, &p.Spec.Containers[0])
	if r.Limits.Cpu().MilliValue() != 1000 {
		t.Errorf("effective cpu limit = %v, want the pod's 1", r.Limits.Cpu())
	}
	if _, ok := r.Limits[corev1.ResourceMemory]; ok {
		t.Error("a memory limit appeared from nowhere")
	}
}

// A container limit of zero is no limit: the pod-level one stands in, as in the container's cgroup.
func TestEffectiveResourcesZeroLimitTakesPodLevel(t *testing.T) {
	p := pod("a", "100m")
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0")}
	p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	r := EffectiveResources(p, &p.Spec.Containers[0])
	if r.Limits.Cpu().MilliValue() != 2000 {
		t.Errorf("effective cpu limit = %v, want the pod's 2", r.Limits.Cpu())
	}
	if p.Spec.Containers[0].Resources.Limits.Cpu().MilliValue() != 0 {
		t.Error("the pod's spec was changed")
	}
}

func TestResizeConditions(t *testing.T) {
	m := InMemory()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if !m.SetPending("a", "OutOfcpu", "no room", 2, t0) {
		t.Error("a new PodResizePending is a change")
	}
	if m.SetPending("a", "OutOfcpu", "still no room", 2, t0.Add(time.Second)) {
		t.Error("a new message alone is no change (no new event)")
	}
	c := m.Pending("a")
	if c.Reason != ReasonDeferred || c.Message != "still no room" || !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("pending = %+v, want Deferred, the new message, the first transition time", c)
	}
	if !m.SetPending("a", ReasonInfeasible, "never", 2, t0.Add(2*time.Second)) {
		t.Error("a new reason is a change")
	}
	m.ClearPending("a")

	m.StartInProgress("a", 3, t0)
	if !m.InProgressError("a", "boom", 4, t0.Add(time.Second)) {
		t.Error("an error is a change")
	}
	conds := m.Conditions("a")
	if len(conds) != 1 || conds[0].Type != corev1.PodResizeInProgress || conds[0].Reason != ReasonError || conds[0].ObservedGeneration != 3 {
		t.Errorf("conditions = %+v, want InProgress Error keeping generation 3", conds)
	}
	m.KeepInProgress("a", 5, t0.Add(2*time.Second))
	if conds := m.Conditions("a"); conds[0].Reason != ReasonError {
		t.Error("KeepInProgress dropped the error")
	}
	if gen, was := m.ClearInProgress("a"); !was || gen != 3 {
		t.Errorf("ClearInProgress = %d, %v; want 3, true", gen, was)
	}
	if len(m.Conditions("a")) != 0 {
		t.Error("conditions left after clearing")
	}
}

// Deferred resizes are retried in the kubelet's order: those that do not grow requests, then by
// priority, Guaranteed first, the longest waiting first.
func TestPendingResizeOrder(t *testing.T) {
	m := InMemory()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pods := map[types.UID]*corev1.Pod{}
	add := func(uid string, fromCPU, toCPU string, prio int32, waited time.Duration, burstable bool) {
		p := pod(uid, fromCPU)
		if err := m.Allocate(p); err != nil {
			t.Fatal(err)
		}
		d := pod(uid, toCPU)
		d.Spec.Priority = ptr.To(prio)
		if burstable {
			d.Spec.Containers[0].Resources.Limits = nil
		}
		pods[d.UID] = d
		m.SetPending(d.UID, "OutOfcpu", "", 2, t0.Add(waited))
	}
	add("grow-low-old", "100m", "200m", 0, 0, false)
	add("grow-high", "100m", "200m", 10, time.Second, false)
	add("shrink", "200m", "100m", 0, 2*time.Second, false)
	add("grow-low-new", "100m", "200m", 0, 3*time.Second, false)
	add("grow-low-burstable", "100m", "200m", 0, -time.Second, true)
	var got []string
	for _, p := range m.PendingResizes(func(uid types.UID) *corev1.Pod { return pods[uid] }) {
		got = append(got, string(p.UID))
	}
	want := "shrink grow-high grow-low-old grow-low-new grow-low-burstable"
	if strings.Join(got, " ") != want {
		t.Errorf("order = %v, want %s", got, want)
	}
}
