// Package checksum is the kubelet's checkpoint checksum, so that nodelet's checkpoint files and the kubelet's
// read each other: FNV-32a over the hash dump (k8s.io/utils/dump.ForHash) of a checkpoint's data. The dump of a
// struct spells its field values in order, not its type or field names: a checkpoint type's fields must be the
// kubelet's, in its order and of its kinds.
//
// It is a leaf helper: it imports no nodelet package.
package checksum
