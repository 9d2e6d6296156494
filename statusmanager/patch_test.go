package statusmanager

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/nodelet/nodelet/podstatus"
)

func cond(t corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
	return corev1.PodCondition{Type: t, Status: s}
}

// applyStatusPatch applies a status patch the way the API server does (strategic merge).
func applyStatusPatch(t *testing.T, server corev1.PodStatus, patch []byte) corev1.PodStatus {
	t.Helper()
	orig, err := json.Marshal(corev1.Pod{Status: server})
	if err != nil {
		t.Fatal(err)
	}
	out, err := strategicpatch.StrategicMergePatch(orig, patch, corev1.Pod{})
	if err != nil {
		t.Fatalf("apply %s: %v", patch, err)
	}
	var p corev1.Pod
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	return p.Status
}

// The agent's status patch never carries a condition it does not own: a readiness gate set by a user
// after the agent computed its status survives the agent's next write, whatever copy the agent saw.
func TestStatusPatchKeepsOthersConditions(t *testing.T) {
	const gate1, gate2 = corev1.PodConditionType("k8s.io/test-condition1"), corev1.PodConditionType("k8s.io/test-condition2")
	written := &corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		cond(corev1.PodReady, corev1.ConditionFalse), cond(corev1.PodScheduled, corev1.ConditionTrue)}}
	// The agent computed Ready=True from a cache showing both gates True ...
	computed := &corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		cond(gate1, corev1.ConditionTrue), cond(gate2, corev1.ConditionTrue),
		cond(corev1.PodReady, corev1.ConditionTrue), cond(corev1.PodScheduled, corev1.ConditionTrue)}}
	// ... while the user already turned gate1 False again.
	server := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		cond(corev1.PodReady, corev1.ConditionFalse), cond(corev1.PodScheduled, corev1.ConditionTrue),
		cond(gate1, corev1.ConditionFalse), cond(gate2, corev1.ConditionTrue)}}

	patch, err := statusPatch("uid-1", podstatus.Owned(written), podstatus.Owned(computed))
	if err != nil {
		t.Fatal(err)
	}
	got := applyStatusPatch(t, server, patch)
	want := map[corev1.PodConditionType]corev1.ConditionStatus{
		corev1.PodReady: corev1.ConditionTrue, corev1.PodScheduled: corev1.ConditionTrue,
		gate1: corev1.ConditionFalse, gate2: corev1.ConditionTrue,
	}
	if len(got.Conditions) != len(want) {
		t.Fatalf("conditions after the patch %s = %v", patch, got.Conditions)
	}
	for _, c := range got.Conditions {
		if want[c.Type] != c.Status {
			t.Errorf("condition %s = %s after the patch %s, want %s", c.Type, c.Status, patch, want[c.Type])
		}
	}
}
