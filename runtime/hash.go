package runtime

import (
	"encoding/json"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
)

// HashContainer fingerprints the parts of a container spec whose change requires a restart. Resources
// are left out: they may change in place. The hash is stored in the container's annotations.
func HashContainer(c *corev1.Container) uint64 {
	cc := c.DeepCopy()
	cc.Resources = corev1.ResourceRequirements{}
	cc.ResizePolicy = nil
	b, _ := json.Marshal(cc) // a Container always marshals
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}
