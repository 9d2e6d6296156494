// Package devices is the node's device manager: the kubelet's device plugin API (v1beta1). Device plugins
// register on <root>/device-plugins/kubelet.sock; the manager dials each plugin back, reads its devices through
// ListAndWatch and advertises them in the Node's capacity (all devices) and allocatable (the healthy ones). At
// admission a pod's containers get devices of every device plugin resource they ask for (GetPreferredAllocation
// when the plugin offers it, then Allocate); at container creation the plugin's answer becomes the container's
// devices, mounts, environment, annotations and CDI devices (PreStartContainer first when the plugin asks for
// it).
//
// Assignments are kept in the kubelet's checkpoint file (<root>/device-plugins/kubelet_internal_checkpoint, its
// JSON and checksum), so an agent restart and a takeover from or by the kubelet keep every pod's devices. A
// plugin that goes away leaves its resource at zero allocatable for five minutes, then the resource leaves the
// Node, as with the kubelet.
//
// PodResourcesServer serves the pod resources API (v1: List, Get, GetAllocatableResources) that monitoring
// agents read on <root>/pod-resources/kubelet.sock.
package devices
