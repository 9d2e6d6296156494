// Package runtime is nodelet's side of the Container Runtime Interface (CRI).
//
// It owns the CRI client (RuntimeService and ImageService over gRPC on a unix socket), with per-RPC
// timeouts, response invariants, gRPC errors mapped to sentinel errors, the kubelet's runtime operation
// metrics and the wait for a runtime that starts late; and what the client reads: a pod's runtime state
// (PodStatus, ContainerStatus) decoded from the kubelet's CRI labels and annotations, whose keys and
// container kinds are defined here for every package that writes or reads them.
//
// Its subpackages build on it: runtime/pleg (the PLEG and its pod state cache), runtime/podconfig (the
// translation of a Pod into sandbox and container configs) and runtime/fake (the in-memory CRI server used
// by tests). It imports none of them, nor controllers/ or podlifecycle/: those consume this package
// through their own small interfaces.
package runtime
