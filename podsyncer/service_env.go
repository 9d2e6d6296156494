package podsyncer

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// The kubelet's messages when it cannot build a container's service variables.
var (
	errNilServiceLinks   = errors.New("nil pod.spec.enableServiceLinks encountered, cannot construct envvars")
	errServicesNotSynced = errors.New("services have not yet been read at least once, cannot construct envvars")
)

// serviceEnv returns the service variables of pod's containers, as the kubelet's makeEnvironmentVariables
// does: none without an API server (standalone mode); until the Services have been read once, an error for
// a pod of the API (its containers wait, so that none starts without KUBERNETES_SERVICE_HOST) and nothing
// for a static pod (which must start while the API server is away).
func (b *configBuilder) serviceEnv(ctx context.Context, pod *corev1.Pod) (map[string]string, error) {
	if pod.Spec.EnableServiceLinks == nil {
		return nil, errNilServiceLinks
	}
	if !b.services.HasSynced() {
		if podrules.IsStaticPod(pod) {
			return nil, nil
		}
		return nil, errServicesNotSynced
	}
	services, err := b.services.ListServices(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to list services when setting up env vars: %w", err)
	}
	return podconfig.ServiceEnv(services, pod.Namespace, *pod.Spec.EnableServiceLinks), nil
}

// reportMissingClusterDNS records the kubelet's MissingClusterDNS warnings, on the node and on the pod,
// when a ClusterFirst pod falls back to the Default DNS policy because the node has no clusterDNS.
func (b *configBuilder) reportMissingClusterDNS(pod *corev1.Pod) {
	if !podconfig.MissingClusterDNS(pod, b.sandboxOpts) {
		return
	}
	const msg = `kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`
	node := &corev1.ObjectReference{Kind: "Node", Name: b.nodeName, UID: types.UID(b.nodeName)}
	b.recorder.Event(node, corev1.EventTypeWarning, "MissingClusterDNS", msg)
	b.recorder.Eventf(PodRef(pod), corev1.EventTypeWarning, "MissingClusterDNS", "pod: %q. %s",
		pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")", msg)
}
