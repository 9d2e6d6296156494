// Package checkpoint is the kubelet's device manager checkpoint file, kubelet_internal_checkpoint, read and
// written so that the kubelet and nodelet take each other's over: its JSON and its checksum. The checksum
// hashes a dump of the data that spells the Go types' package-qualified names, so this package is named as
// the kubelet's (checkpoint) and its types carry the kubelet's names (checkpointData, PodDevicesEntry,
// DevicesPerNUMA), fields and order.
//
// It imports no nodelet package but internal/checksum.
package checkpoint
