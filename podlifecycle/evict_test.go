package podlifecycle

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// An eviction (KillPod) stops the pod within the eviction's grace period rather than its own, and its final
// status is the eviction's: Failed, reason and message, a DisruptionTarget condition. The pod leaves the
// active pods at once and is cleaned up once stopped.
func TestKillPodEvicts(t *testing.T) {
	b := newLifecycleBed(t)
	b.create(bedPod("hog", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(300)) }))
	b.create(bedPod("keeper"))
	b.sync("hog")
	b.sync("keeper")
	if got := len(b.r.ActivePods()); got != 2 {
		t.Fatalf("%d active pods, want 2", got)
	}
	hog := b.pod("hog")
	const msg = "The node was low on resource: memory. "
	b.r.KillPod(hog, 1, "Evicted", msg, &corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonTerminationByKubelet, Message: msg})
	if got := b.r.ActivePods(); len(got) != 1 || got[0].Name != "keeper" {
		t.Errorf("active pods after KillPod: %v, want only keeper", got)
	}
	if b.r.PodCleanedUp(hog.UID) {
		t.Error("cleaned up before it was stopped")
	}
	b.sync("hog")
	// The fake's containers ignore SIGTERM: the 1 s grace period (not the pod's 300 s), then the minimum
	// stop timeout, ends them.
	b.step(2 * time.Second)
	b.waitKill("hog")
	b.sync("hog")
	p := b.pod("hog")
	if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "Evicted" || p.Status.Message != msg {
		t.Errorf("status %s %q %q, want Failed Evicted %q", p.Status.Phase, p.Status.Reason, p.Status.Message, msg)
	}
	var found bool
	for _, c := range p.Status.Conditions {
		found = found || c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "TerminationByKubelet"
	}
	if !found {
		t.Errorf("no DisruptionTarget condition: %+v", p.Status.Conditions)
	}
	for _, c := range b.containers("hog") {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s still runs", c.Metadata.Name)
		}
	}
	if !b.r.PodCleanedUp(hog.UID) {
		t.Error("not cleaned up after it stopped")
	}
	if b.pod("keeper").Status.Phase != corev1.PodRunning {
		t.Error("the other pod was touched")
	}
}

// The other admission handlers (the eviction manager's) run first; a refusal fails the pod with their
// reason and the kubelet's "Pod was rejected: " message.
func TestAdmittersRejectFirst(t *testing.T) {
	b := newLifecycleBed(t)
	b.r.admitters = []PodAdmitter{refuseAll{}}
	b.create(bedPod("rejected"))
	b.sync("rejected")
	p := b.pod("rejected")
	if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "Evicted" ||
		p.Status.Message != "Pod was rejected: The node had condition: [MemoryPressure]. " {
		t.Errorf("status %s %q %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	if len(b.containers("rejected")) != 0 {
		t.Error("a rejected pod's containers were created")
	}
}

type refuseAll struct{}

func (refuseAll) Admit(*corev1.Pod) (bool, string, string) {
	return false, "Evicted", "The node had condition: [MemoryPressure]. "
}

// A kill that has not stopped the pod one and a half grace periods (10 s at least) later gets the kubelet's
// ExceededGracePeriod event.
func TestKillPodThatOutlastsItsGraceIsReported(t *testing.T) {
	b := newLifecycleBed(t)
	b.create(bedPod("stuck"))
	b.sync("stuck")
	const want = "Warning ExceededGracePeriod Container runtime did not kill the pod within specified grace period."
	exceeded := func() bool {
		for {
			select {
			case e := <-b.rec.Events:
				if e == want {
					return true
				}
			default:
				return false
			}
		}
	}
	b.r.KillPod(b.pod("stuck"), 1, "Evicted", "evicted", nil) // the pod is not synced: the kill is never carried out
	b.step(9 * time.Second)
	if exceeded() {
		t.Fatal("ExceededGracePeriod before 10 s")
	}
	b.step(time.Second)
	b.waitFor("the ExceededGracePeriod event", exceeded)
}
