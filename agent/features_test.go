package agent

import (
	"slices"
	"testing"
)

// The node declares the in-place resize of non-sidecar init containers, which it does, and not pod-level
// resize, which it does not.
func TestDeclaredFeatures(t *testing.T) {
	got := declaredFeatures("v1.37.1")
	if !slices.Contains(got, "InPlacePodVerticalScalingInitContainers") {
		t.Errorf("declared %v, want InPlacePodVerticalScalingInitContainers", got)
	}
	if slices.Contains(got, "InPlacePodLevelResourcesVerticalScaling") {
		t.Errorf("declared %v: pod-level resize is not implemented", got)
	}
}
