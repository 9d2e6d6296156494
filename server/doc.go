// Package server is nodelet's node API: the HTTPS server on the kubelet port (10250) that the API server
// and metrics-server talk to, with the kubelet's endpoints and semantics: /healthz, /pods, /containerLogs,
// /exec, /attach, /portForward and /run (through the CRI streaming server), /metrics, /metrics/resource,
// /metrics/probes, /stats/summary, /configz, /debug/pprof/, /flagz and /statusz. Every request is
// authenticated (x509 client certificates, bearer tokens by TokenReview, anonymous only when enabled) and
// authorized (SubjectAccessReview on nodes/<subresource>, or AlwaysAllow), as the KubeletConfiguration's
// authentication and authorization sections say. It also rotates container logs (containerLogMaxSize,
// containerLogMaxFiles) with CRI ReopenContainerLog.
//
// It reaches the runtime and the pods only through the Runtime and Pods interfaces declared here. It must not
// create, start or stop containers, nor write pods: it reports and streams, the controllers act.
package server
