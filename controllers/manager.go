package controllers

import (
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/podrules"
)

// CacheOptions scopes the manager's cache to what a node may list and watch under the Node authorizer:
// its own Node (metadata.name), the pods bound to it (spec.nodeName) and, as the kubelet, the Services of
// the whole cluster for service environment variables — headless ones left out, since they give none.
//
// Cached objects are kept without their managedFields, which nothing on a node reads. Pods are stamped with
// the API source on the way in (podrules.MarkFromAPI): a config.source annotation written by a pod's creator
// never makes it static.
func CacheOptions(nodeName string) cache.Options {
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:     {Field: fields.OneTermEqualSelector("spec.nodeName", nodeName), Transform: TransformAPIPod},
		&corev1.Node{}:    {Field: fields.OneTermEqualSelector("metadata.name", nodeName)},
		&corev1.Service{}: {Field: fields.OneTermNotEqualSelector("spec.clusterIP", corev1.ClusterIPNone)},
	}}
}

// TransformAPIPod is the cache's transform for pods: managedFields stripped, the API source stamped.
func TransformAPIPod(in any) (any, error) {
	out, err := cache.TransformStripManagedFields()(in)
	if pod, ok := out.(*corev1.Pod); ok {
		podrules.MarkFromAPI(pod)
	}
	return out, err
}

// ClientOptions keeps Secrets, ConfigMaps and Leases out of the cache: a node may only get them by name,
// and caching them cluster-wide would read far more than the node's pods need.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{
		DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}, &coordinationv1.Lease{}},
	}}
}

// RESTMapper maps the few kinds the agent uses without asking the API server's discovery: the agent must
// start (and run static pods) while the API server is unreachable, and need not read discovery at all.
// It is built once and shared (read-only) by every node of a process.
func RESTMapper() meta.RESTMapper { return restMapper() }

var restMapper = sync.OnceValue(newRESTMapper)

func newRESTMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	add := func(gv schema.GroupVersion, scope meta.RESTScope, kinds ...string) {
		for _, k := range kinds {
			m.Add(gv.WithKind(k), scope)
			m.Add(gv.WithKind(k+"List"), scope)
		}
	}
	add(corev1.SchemeGroupVersion, meta.RESTScopeNamespace, "Pod", "Secret", "ConfigMap", "Event", "ServiceAccount", "Service", "Endpoints",
		"PersistentVolumeClaim")
	add(corev1.SchemeGroupVersion, meta.RESTScopeRoot, "Node", "Namespace", "PersistentVolume")
	add(storagev1.SchemeGroupVersion, meta.RESTScopeRoot, "CSINode", "CSIDriver", "VolumeAttachment")
	add(coordinationv1.SchemeGroupVersion, meta.RESTScopeNamespace, "Lease")
	add(certificatesv1.SchemeGroupVersion, meta.RESTScopeRoot, "ClusterTrustBundle")
	add(nodev1.SchemeGroupVersion, meta.RESTScopeRoot, "RuntimeClass")
	add(authenticationv1.SchemeGroupVersion, meta.RESTScopeRoot, "TokenReview")
	add(authorizationv1.SchemeGroupVersion, meta.RESTScopeRoot, "SubjectAccessReview")
	add(eventsv1.SchemeGroupVersion, meta.RESTScopeNamespace, "Event")
	add(resourcev1.SchemeGroupVersion, meta.RESTScopeNamespace, "ResourceClaim")
	add(resourcev1.SchemeGroupVersion, meta.RESTScopeRoot, "ResourceSlice")
	return m
}
