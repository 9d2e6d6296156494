package agent

import (
	"slices"
	"testing"
)

// The node declares the features whose behaviour it has (the kubelet v1.37.1's beta and GA ones) and none of
// the alpha ones.
func TestDeclaredFeatures(t *testing.T) {
	got := declaredFeatures("v1.37.1")
	for _, want := range []string{
		"InPlacePodVerticalScalingInitContainers", "InPlacePodLevelResourcesVerticalScaling", "RestartAllContainersOnContainerExits",
		"ExtendWebSocketsToKubelet",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("declared %v, want %s", got, want)
		}
	}
	for _, alpha := range []string{"InPlacePodVerticalScalingMemoryBackedVolumes", "DRAOptionalNodeOperations", "VolumeBindMountOptions"} {
		if slices.Contains(got, alpha) {
			t.Errorf("declared %v: %s is not implemented", got, alpha)
		}
	}
}
