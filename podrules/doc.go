// Package podrules holds the pod rules that several packages need, each in exactly one function: whether a
// pod is static, a mirror or critical; whether a container restarts after it exits; finding a container of a
// pod by name; resolving a container resource field (downward API, env and volumes alike); a pod's QoS class
// (status, cgroups, OOM scores and eviction alike); what a pod requests of the node and its limits
// (admission, status and the pod's cgroup alike); a pod's cgroup name (the sandbox's cgroup parent and the
// cgroup manager alike) and the values written to it; huge page sizes and limits; which containers may swap
// and how much; whether a pod has a user namespace of its own; resolving a probe's or hook's port; and
// whether an identifier (UID, namespace, name, container or volume name) may become a path segment — every function that builds a host path from one
// checks it with PathSegment. Status computation, pod actions, volumes and the node API all call these
// functions; none keeps a copy of its own.
//
// It is a leaf (the podrules-leaf depguard rule in .golangci.yml): it imports only the Kubernetes API types
// and apimachinery, never another nodelet package, and it must not call the API server or the CRI, read
// files, or keep state.
package podrules
