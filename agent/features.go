package agent

import (
	"k8s.io/apimachinery/pkg/util/version"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/inplacepodresize"
)

// implementedFeatures are the node-declared features (k8s.io/component-helpers' registry) whose behaviour
// the agent has: it resizes running non-sidecar init containers in place. Pod-level resource resize and
// the others are not declared, so the API server refuses the pods and updates that need them instead of
// the node getting them wrong.
var implementedFeatures = map[string]bool{
	inplacepodresize.IPPRInitContainersFeatureGate: true,
}

type implemented struct{}

func (implemented) Enabled(name string) bool { return implementedFeatures[name] }

// declaredFeatures are the node's status.declaredFeatures, discovered as the kubelet discovers them
// (the registry's own rules, the features past their last version left out) from what the agent
// implements.
func declaredFeatures(kubeletVersion string) []string {
	cfg := &ndf.NodeConfiguration{FeatureGates: implemented{}}
	if v, err := version.Parse(kubeletVersion); err == nil {
		cfg.Version = v
	}
	return ndf.DefaultFramework.DiscoverNodeFeatures(cfg)
}
