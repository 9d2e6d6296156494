// Package csi is the node side of CSI, as the kubelet's plugin manager and CSI plugin have it: the
// registration of CSI drivers on this node, what the API server is told of them, and a client of their
// node service.
//
// # Registration
//
// PluginWatcher watches <root-dir>/plugins_registry and the directories under it (fsnotify, after a scan
// of what is there at start) for the registration sockets of plugins — node-driver-registrar makes
// <root-dir>/plugins_registry/<driver>-reg.sock — and speaks the kubelet's plugin registration API
// (k8s.io/kubelet/pkg/apis/pluginregistration/v1) to each: GetInfo, then the Handler of the plugin's type
// validates and registers it, then NotifyRegistrationStatus tells the plugin the outcome (a refusal with
// the kubelet's message). DRA plugins go to the handler Options.Handlers gives for DRAPlugin (package dra); a
// plugin of a type no Handler takes is refused. A failed registration is tried again, from half a second to two minutes apart, for as long
// as its socket is there; a socket removed de-registers its plugin, and a socket made again at the same
// path (the registrar restarted) re-registers it.
//
// RegistrationHandler is the Handler of CSIPlugin: the driver name must be valid and the plugin must
// support a CSI 1.x version (higher than that of a registration of the name from another socket, which it
// then replaces); the driver's NodeGetInfo, at the endpoint the plugin gave, must answer with a node ID.
// The driver is then in the Registry, where the volume manager finds it by name (Registry.Get,
// Registry.NodeClient).
//
// # The API server
//
// NodeInfo keeps the node's CSINode object (owned by the Node, with the
// storage.alpha.kubernetes.io/migrated-plugins annotation the kubelet writes) and the Node's
// csi.volume.kubernetes.io/nodeid annotation and topology labels in line with the registry: a driver
// registered is written there before its plugin is told it is registered, and a driver de-registered is
// taken out (its topology labels stay, as the kubelet leaves them). A write that fails is retried with a
// back-off until it succeeds; only what writing again cannot fix (a topology label the Node has with
// another value) refuses the registration. It reads and writes only the Node and the CSINode named after
// this node, as the Node authorizer and NodeRestriction allow system:node:<name>.
//
// # The node service
//
// Client calls a driver's node service over its unix socket: NodeGetInfo, NodeGetCapabilities (asked once
// per registration), NodeStageVolume, NodeUnstageVolume, NodePublishVolume, NodeUnpublishVolume,
// NodeGetVolumeStats and NodeExpandVolume, each within the kubelet's two minutes. Errors are the driver's
// gRPC status errors as they are; a stage, publish or expand call that failed without a final answer (a
// timeout, Canceled, Unavailable, ResourceExhausted, Aborted) returns an *UncertainError: the operation
// may still be going on.
//
// # What it must not touch
//
// Volumes themselves: mounting, staging paths and the pods' directories belong to package volumes, which
// calls the drivers through the Registry.
package csi
