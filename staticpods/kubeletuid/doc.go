// Package kubeletuid computes static pod UIDs exactly as the kubelet does, from the kubelet's own API
// types and hashing (k8s.io/kubernetes), so that a node handed over from the kubelet to nodelet (or back)
// keeps every static pod's UID, mirror pod and running containers.
//
// It is the one package of nodelet that imports k8s.io/kubernetes, and only package main imports it:
// that module pins its staging modules at v0.0.0 and needs a replace for each, which a module importing
// nodelet as a library (agent, testnode) must not inherit. Library users get staticpods' own UID hash.
package kubeletuid
