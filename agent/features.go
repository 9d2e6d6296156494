package agent

import (
	"k8s.io/apimachinery/pkg/util/version"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/extendwebsocketstokubelet"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/inplacepodresize"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/restartallcontainers"
)

// implementedFeatures are the node-declared features (k8s.io/component-helpers' registry) whose behaviour
// the agent has: it resizes running non-sidecar init containers and pod-level resources in place, restarts
// every container of a pod whose restart rule says RestartAllContainers, and serves WebSocket exec, attach
// (v5 remotecommand) and port-forward (tunnelled SPDY) itself, so the API server proxies them as they come.
// The others (alpha in the kubelet) are not declared, so the scheduler and the API server keep the pods and
// updates that need them away from the node instead of the node getting them wrong.
var implementedFeatures = map[string]bool{
	inplacepodresize.IPPRInitContainersFeatureGate:                 true,
	inplacepodresize.IPPRPodLevelResourcesFeatureGate:              true,
	restartallcontainers.RestartAllContainersOnContainerExits:      true,
	extendwebsocketstokubelet.ExtendWebSocketsToKubeletFeatureGate: true,
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
