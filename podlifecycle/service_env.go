package podlifecycle

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
func (r *Reconciler) serviceEnv(ctx context.Context, pod *corev1.Pod) (map[string]string, error) {
	if pod.Spec.EnableServiceLinks == nil {
		return nil, errNilServiceLinks
	}
	if !r.services.HasSynced() {
		if podrules.IsStaticPod(pod) {
			return nil, nil
		}
		return nil, errServicesNotSynced
	}
	services, err := r.services.ListServices(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to list services when setting up env vars: %w", err)
	}
	return podconfig.ServiceEnv(services, pod.Namespace, *pod.Spec.EnableServiceLinks), nil
}

// APIServices reads the cluster's Services from the manager's cache: the Node authorizer lets a node list
// and watch them cluster-wide, and the kubelet keeps an informer on all of them for environment variables
// (CacheOptions leaves headless ones out).
type APIServices struct {
	informer cache.Informer
	reader   client.Reader
}

// NewAPIServices registers the Service informer on c, without waiting: it starts and syncs with the cache.
func NewAPIServices(ctx context.Context, c cache.Cache) (*APIServices, error) {
	informer, err := c.GetInformer(ctx, &corev1.Service{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("service informer: %w", err)
	}
	return &APIServices{informer: informer, reader: c}, nil
}

// HasSynced tells whether the informer has listed the Services once.
func (s *APIServices) HasSynced() bool { return s.informer.HasSynced() }

// ListServices lists the cached Services.
func (s *APIServices) ListServices(ctx context.Context) ([]corev1.Service, error) {
	var list corev1.ServiceList
	if err := s.reader.List(ctx, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// reportMissingClusterDNS records the kubelet's MissingClusterDNS warnings, on the node and on the pod,
// when a ClusterFirst pod falls back to the Default DNS policy because the node has no clusterDNS.
func (r *Reconciler) reportMissingClusterDNS(pod *corev1.Pod) {
	if !podconfig.MissingClusterDNS(pod, r.sandboxOpts) {
		return
	}
	const msg = `kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`
	node := &corev1.ObjectReference{Kind: "Node", Name: r.nodeName, UID: types.UID(r.nodeName)}
	r.recorder.Event(node, corev1.EventTypeWarning, "MissingClusterDNS", msg)
	r.recorder.Eventf(podRef(pod), corev1.EventTypeWarning, "MissingClusterDNS", "pod: %q. %s",
		pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")", msg)
}
