package checksum

import (
	"fmt"
	"hash/fnv"

	"k8s.io/utils/dump"
)

// New is the kubelet's checksum of a checkpoint's data (checkpointmanager/checksum.New).
func New(data any) uint64 {
	h := fnv.New32a()
	_, _ = fmt.Fprintf(h, "%v", dump.ForHash(data))
	return uint64(h.Sum32())
}
