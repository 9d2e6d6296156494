// Package podcertificates issues the credentials of podCertificate projected volumes (certificates.k8s.io/v1
// PodCertificateRequests) for the pods bound to this node, with the kubelet's own issuing manager
// (k8s.io/kubernetes/pkg/kubelet/podcertificate): for each podCertificate source of each pod it makes a
// private key of the source's type, creates a PodCertificateRequest with its proof of possession, waits for
// the signer to issue, deny or fail it (events PodCertificateRequestDenied/Failed on the pod), and requests
// a fresh certificate from the issued one's beginRefreshAt on (CertificateOverdueForRefresh and
// CertificateExpired events when a refresh is late). Credentials live in memory only: a restarted node
// requests new ones, as the kubelet does.
//
// The Manager follows the pods from the node's pod informer, keeping only those with a podCertificate
// source (mirror pods have none to keep). Its own watches — the node's PodCertificateRequests
// (spec.nodeName) and its Node (metadata.name), what the Node authorizer lets a node read — start with the
// first such pod, so a node whose pods use none pays nothing. It serves kubelet_podcertificate_states
// {signer_name,state}, the kubelet's gauge.
package podcertificates
