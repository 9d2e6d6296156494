// Package hollow runs many simulated nodes in one process against a real cluster, for control-plane scale
// tests — what kubemark does with one process (and ~220 MB) per node. Each hollow node is a real nodelet
// agent on the in-memory runtime (simnode): its pods go through the real reconcilers, status,
// events, node status and lease, and pod annotations script containers as for testnode. What correctness
// allows is shared across the nodes of the process: the client transport and the Service informer; each
// node still watches only its own pods and its own Node.
package hollow
