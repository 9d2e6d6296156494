package podconfig

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/dump"
)

// HashContainer fingerprints the parts of a container spec whose change requires a restart, exactly as the
// kubelet's HashContainer does (the same value for the same container): FNV-32a over the dump of the JSON
// of the container's name and image, the only fields of a pod's container that may change. The hash is
// stored in the container's annotations, so an agent that takes a node over (kubelet or nodelet) keeps
// the other's containers running.
func HashContainer(c *corev1.Container) uint64 {
	b, _ := json.Marshal(map[string]string{"name": c.Name, "image": c.Image}) // a string map always marshals
	h := fnv.New32a()
	_, _ = fmt.Fprintf(h, "%v", dump.ForHash(b))
	return uint64(h.Sum32())
}
