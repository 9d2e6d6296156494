// Package agent builds and runs one nodelet node: the controller-runtime manager scoped to what a node may
// see, the CRI client and PLEG, the pod, node, lease and mirror pod reconcilers, probes, volumes, static pod
// sources and the node API server. main, the envtest suites, testnode and hollow nodes all build a node
// through New, so the wiring lives here once.
//
// New validates the configuration and dependencies and wires everything without starting anything; Run
// starts every component under one errgroup and returns the first error of any of them (a component that
// fails stops the node, as the kubelet exits).
package agent
