// Package probes will own the probe workers (exec through CRI ExecSync, httpGet, tcpSocket, grpc), their
// result cache, and the event source that reports result changes to the Pod reconciler.
//
// It reports; it must not restart containers itself.
//
// Status: the package is reserved by the layout; probes arrive with the volumes and probes work item.
package probes
