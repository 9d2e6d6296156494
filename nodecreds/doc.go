// Package nodecreds gives the node its API credentials as the kubelet does, with the kubelet's own code
// (k8s.io/kubernetes/pkg/kubelet/certificate): TLS bootstrap — with --bootstrap-kubeconfig and no valid
// --kubeconfig, a client certificate for system:node:<name> is requested through a
// kubernetes.io/kube-apiserver-client-kubelet CSR with the bootstrap credentials, written to --cert-dir
// (kubelet-client-current.pem) and referenced by a new --kubeconfig — and, with rotateCertificates, a
// certificate manager that renews the client certificate before it expires, every connection using the
// current one (connections are closed when it changes).
//
// Like staticpods/kubeletuid, only package main imports it (k8s.io/kubernetes needs replace directives
// that library users must not inherit).
package nodecreds
