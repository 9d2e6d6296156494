// Package operator is an operator author's test suite, as an outside Go module would write it: envtest
// (an API server and etcd, no node) plus nodelet's testnode for the nodes. It imports only testnode,
// controller-runtime's envtest and the Kubernetes API types and client.
package operator
