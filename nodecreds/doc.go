// Package nodecreds gives the node its API credentials as the kubelet does: TLS bootstrap — with
// --bootstrap-kubeconfig and no valid --kubeconfig, a client certificate for system:node:<name> is requested
// through a kubernetes.io/kube-apiserver-client-kubelet CSR with the bootstrap credentials, written to
// --cert-dir (kubelet-client-current.pem) and referenced by a new --kubeconfig (bootstrap.go, on client-go's
// CSR and certificate store helpers, with the kubelet's files and steps) — and, with rotateCertificates, the
// kubelet's own certificate managers (k8s.io/kubernetes/pkg/kubelet/certificate): the client certificate
// renewed before it expires, every connection using the current one (connections are closed when it
// changes), and the serving certificate of serverTLSBootstrap.
//
// Like staticpods/kubeletuid, only package main imports it (k8s.io/kubernetes needs replace directives
// that library users must not inherit).
package nodecreds
