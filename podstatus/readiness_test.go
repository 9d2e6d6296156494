package podstatus

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const (
	gate1 = corev1.PodConditionType("k8s.io/test-condition1")
	gate2 = corev1.PodConditionType("k8s.io/test-condition2")
)

// gatedPod is a running pod with two readiness gates whose API status holds gates.
func gatedPod(gates ...corev1.PodCondition) *corev1.Pod {
	p := withStatus(newPod(corev1.RestartPolicyAlways, "app"), runningStatus("containerd://app-0"))
	p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate1}, {ConditionType: gate2}}
	p.Status.Conditions = append(p.Status.Conditions, gates...)
	return p
}

func gateCondition(t corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
	return corev1.PodCondition{Type: t, Status: s}
}

// The agent computes from its own last status (the kubelet's status manager cache), but a gate's
// condition set later through pods/status is only in the API's status: it must still count.
func TestComputeTakesGateConditionsFromTheAPI(t *testing.T) {
	rt := podRuntime(readySandbox("10.0.0.5"), runningAttempt("app", 0))
	own := Compute(baseInput(gatedPod(), rt))
	checkConditions(t, own, []wantCondition{{t: corev1.PodReady, status: corev1.ConditionFalse, reason: "ReadinessGatesNotReady",
		message: `corresponding condition of pod readiness gate "k8s.io/test-condition1" does not exist., corresponding condition of pod readiness gate "k8s.io/test-condition2" does not exist.`}})

	tests := []struct {
		name  string
		gates []corev1.PodCondition
		want  wantCondition
	}{{
		name:  "one gate true",
		gates: []corev1.PodCondition{gateCondition(gate1, corev1.ConditionTrue)},
		want: wantCondition{t: corev1.PodReady, status: corev1.ConditionFalse, reason: "ReadinessGatesNotReady",
			message: `corresponding condition of pod readiness gate "k8s.io/test-condition2" does not exist.`},
	}, {
		name:  "both gates true",
		gates: []corev1.PodCondition{gateCondition(gate1, corev1.ConditionTrue), gateCondition(gate2, corev1.ConditionTrue)},
		want:  wantCondition{t: corev1.PodReady, status: corev1.ConditionTrue},
	}, {
		name:  "a gate turned false again",
		gates: []corev1.PodCondition{gateCondition(gate1, corev1.ConditionFalse), gateCondition(gate2, corev1.ConditionTrue)},
		want: wantCondition{t: corev1.PodReady, status: corev1.ConditionFalse, reason: "ReadinessGatesNotReady",
			message: `the status of pod readiness gate "k8s.io/test-condition1" is not "True", but False`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := gatedPod()
			p.Status = *own.DeepCopy() // the agent's own last status: no gate conditions in it
			api := gatedPod(tt.gates...).Status
			in := baseInput(p, rt)
			in.API = &api
			s := Compute(in)
			checkConditions(t, s, []wantCondition{tt.want})
			for _, g := range tt.gates {
				checkConditions(t, s, []wantCondition{{t: g.Type, status: g.Status}})
			}
		})
	}
}

func TestNeedsReadinessSync(t *testing.T) {
	rt := podRuntime(readySandbox("10.0.0.5"), runningAttempt("app", 0))
	// written is what the agent writes for a pod whose API status holds gates.
	written := func(gates ...corev1.PodCondition) *corev1.Pod {
		p := gatedPod(gates...)
		p.Status = Compute(baseInput(p, rt))
		return p
	}
	withGates := func(p *corev1.Pod, gates ...corev1.PodCondition) *corev1.Pod {
		p = p.DeepCopy()
		for _, g := range gates {
			if c := findCondition(p.Status.Conditions, g.Type); c != nil {
				*c = g
				continue
			}
			p.Status.Conditions = append(p.Status.Conditions, g)
		}
		return p
	}
	noGates := withStatus(newPod(corev1.RestartPolicyAlways, "app"), runningStatus("containerd://app-0"))
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"no readiness gates", noGates, false},
		{"the agent's own write", written(), false},
		{"own write with both gates true", written(gateCondition(gate1, corev1.ConditionTrue), gateCondition(gate2, corev1.ConditionTrue)), false},
		{"first gate set true: Ready stays false but its message changes", withGates(written(), gateCondition(gate1, corev1.ConditionTrue)), true},
		{"second gate set true: Ready must turn true",
			withGates(written(gateCondition(gate1, corev1.ConditionTrue)), gateCondition(gate2, corev1.ConditionTrue)), true},
		{"a gate turned false: Ready must turn false",
			withGates(written(gateCondition(gate1, corev1.ConditionTrue), gateCondition(gate2, corev1.ConditionTrue)), gateCondition(gate1, corev1.ConditionFalse)), true},
		{"no Ready condition yet", func() *corev1.Pod {
			p := newPod(corev1.RestartPolicyAlways, "app")
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate1}}
			p.Status.Conditions = append(p.Status.Conditions, gateCondition(gate1, corev1.ConditionTrue))
			return p
		}(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NeedsReadinessSync(tt.pod); got != tt.want {
				t.Errorf("NeedsReadinessSync = %v, want %v (conditions %v)", got, tt.want, tt.pod.Status.Conditions)
			}
		})
	}
}

func TestOwnedLeavesOthersConditionsOut(t *testing.T) {
	s := &corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		gateCondition(gate1, corev1.ConditionTrue),
		gateCondition(corev1.PodReady, corev1.ConditionTrue),
		gateCondition(corev1.DisruptionTarget, corev1.ConditionTrue),
		gateCondition(corev1.PodScheduled, corev1.ConditionTrue),
	}}
	got := Owned(s)
	var types []corev1.PodConditionType
	for _, c := range got.Conditions {
		types = append(types, c.Type)
	}
	want := []corev1.PodConditionType{corev1.PodReady, corev1.DisruptionTarget, corev1.PodScheduled}
	if len(types) != len(want) {
		t.Fatalf("conditions = %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("conditions = %v, want %v", types, want)
		}
	}
	if got.Phase != corev1.PodRunning || len(s.Conditions) != 4 {
		t.Errorf("Owned changed the phase or its input")
	}
}

// Claim statuses are the resource claim controller's: the API's copy wins over the agent's own last
// status, so the agent never writes an older one back over a newer one.
func TestComputeTakesClaimStatusesFromTheAPI(t *testing.T) {
	rt := podRuntime(readySandbox("10.0.0.5"), runningAttempt("app", 0))
	p := gatedPod()
	own := Compute(baseInput(p, rt))
	name := "claim-1"
	p.Status = *own.DeepCopy()
	p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &name}}
	api := gatedPod().Status
	api.ResourceClaimStatuses = nil
	in := baseInput(p, rt)
	in.API = &api
	if s := Compute(in); len(s.ResourceClaimStatuses) != 0 {
		t.Errorf("ResourceClaimStatuses = %v, want the API's (none)", s.ResourceClaimStatuses)
	}
	newer := "claim-2"
	api.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &newer}}
	if s := Compute(in); len(s.ResourceClaimStatuses) != 1 || *s.ResourceClaimStatuses[0].ResourceClaimName != newer {
		t.Errorf("ResourceClaimStatuses = %v, want the API's claim-2", s.ResourceClaimStatuses)
	}
}
