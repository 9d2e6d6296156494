// Package simnode builds simulated nodes: a real nodelet agent on the in-memory runtime (runtime/fake),
// touching nothing of the host, with containers and probes scripted by pod annotations. testnode (nodes
// for envtest suites) and hollow (many nodes in one process against a real cluster) are both built on it.
package simnode
