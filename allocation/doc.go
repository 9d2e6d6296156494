// Package allocation keeps, for each pod on the node, the resources the agent admitted it with (its
// allocation) and the resources it last applied to the runtime (its actuation), as the kubelet's allocation
// manager does, and decides in-place resizes.
//
// A pod's spec may ask for other resources than it was admitted with: a resize through the pods/resize
// subresource. Until the node accepts it, everything on the pod's path — its sync, its cgroups, its status'
// allocatedResources, the admission of other pods — takes the allocation (PodWithAllocation). Both records
// are the kubelet's checkpoint files in the root directory (allocated_pods_state, actuated_pods_state, in the
// kubelet's format and checksum), so an agent restart, and a takeover from or by the kubelet, keep them.
//
// The resize conditions (PodResizePending with reason Deferred or Infeasible, PodResizeInProgress with
// reason Error on a failed actuation) are kept here too, with their observed generation and transition
// times, for the pod's status; resizes deferred for want of room wait in a queue ordered as the kubelet
// orders it (resizes that do not grow requests first, then by priority, Guaranteed first, oldest first).
package allocation
