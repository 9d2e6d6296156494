// Package kubeclient is the agent's typed API client: the API groups a node agent calls (core/v1 for
// events, nodes, pods and service accounts, authentication/v1 TokenReviews and authorization/v1
// SubjectAccessReviews for the node API, certificates/v1 CSRs and PodCertificateRequests) over one HTTP
// client, as a kubernetes.Interface so that client-go's and the kubelet's libraries that want one (the
// certificate managers, the pod certificate issuer, typed informers) take it.
//
// client-go's own Clientset builds a client for every group the API has; linking it costs the binary about
// 9 MB of code for groups a node never calls, and with it resident memory. A group this package does not
// serve panics when called (a nil dereference): a programming error that the tests of its caller catch.
package kubeclient
