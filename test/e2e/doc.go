// Package e2e is nodelet's end-to-end suite. It runs against a real single-node bed brought up by
// hack/bed.sh (etcd, kube-apiserver with the Node authorizer and NodeRestriction, kube-scheduler,
// kube-controller-manager, containerd + runc + CNI, a loopback registry) with the nodelet binary as the
// node. hack/e2e.sh starts the bed, runs `go test ./test/e2e/...` and tears the bed down.
//
// Environment: KUBECONFIG (admin), NODELET_BED_DIR, NODELET_BED_SCRIPT. The suite fails, never skips,
// when they are missing.
package e2e
