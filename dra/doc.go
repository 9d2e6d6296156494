// Package dra is the node side of dynamic resource allocation, as the kubelet's DRA manager: the DRA
// drivers' kubelet plugins, and the preparation of the ResourceClaims allocated to the pods of this node.
//
// # Plugins
//
// Plugins is the plugin watcher's handler of the DRAPlugin type (<root>/plugins_registry): a driver's
// plugin names the gRPC services it offers (v1.DRAPlugin, v1beta1.DRAPlugin) and one the kubelet knows is
// chosen; several plugins of one driver may be registered (a rolling update), the newest connected one is
// used. The ResourceSlices of this node are deleted at start, and a driver's 30 s after its last plugin
// went away (de-registered or disconnected) unless one came back, as the kubelet wipes them.
//
// # Claims
//
// Before a pod's sandbox is made, Manager.PrepareResources reads each of the pod's ResourceClaims (the
// claim named in the spec, or the one made from a template, as the pod's status names it, or the claim
// backing its DRA extended resources), checks that it is allocated and reserved for the pod, and asks each
// driver of the allocation to prepare it (NodePrepareResources, one call per driver for the pod's claims),
// once per claim however many pods share it. The devices each driver prepared — their CDI device IDs — go
// to the containers that name the claim (and request) in resources.claims, as CDI devices of their CRI
// config. Once every container of a pod has stopped, UnprepareResources releases the pod's claims; a claim
// is unprepared (NodeUnprepareResources) when its last pod on the node released it. What is prepared for
// which pods is kept in the kubelet's checkpoint file (<root>/dra_manager_state, its JSON and checksum),
// so an agent restart and a takeover from or by the kubelet unprepare exactly what was prepared.
package dra
