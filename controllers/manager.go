package controllers

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheOptions scopes the manager's cache to what a node may list and watch under the Node authorizer:
// its own Node (metadata.name) and the pods bound to it (spec.nodeName).
func CacheOptions(nodeName string) cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:  {Field: fields.OneTermEqualSelector("spec.nodeName", nodeName)},
		&corev1.Node{}: {Field: fields.OneTermEqualSelector("metadata.name", nodeName)},
	}}
}

// ClientOptions keeps Secrets, ConfigMaps and Leases out of the cache: a node may only get them by name,
// and caching them cluster-wide would read far more than the node's pods need.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{
		DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}, &coordinationv1.Lease{}},
	}}
}
