package volumes

import (
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// downwardAPIPayload renders the items of a downwardAPI volume (or projection), as the kubelet's
// CollectData: pod fields (metadata.name, namespace, uid, labels, annotations, one label or annotation)
// and container resources (podrules.VolumeResourceValue: the divisor, and a limit the container leaves
// unset read as the node's allocatable). Each item gets its mode, else defaultMode. An item that cannot
// be resolved is an error (all of them, aggregated) and fails the volume.
func downwardAPIPayload(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defaultMode int32, alloc corev1.ResourceList) (map[string]fileProjection, error) {
	payload := make(map[string]fileProjection, len(items))
	var errs []error
	for _, item := range items {
		var value string
		var err error
		switch {
		case item.FieldRef != nil:
			value, err = podconfig.PodMetadataField(pod, item.FieldRef.FieldPath)
		case item.ResourceFieldRef != nil:
			value, err = podrules.VolumeResourceValue(pod, item.ResourceFieldRef, alloc)
		}
		if err != nil {
			errs = append(errs, err)
		}
		payload[filepath.Clean(item.Path)] = fileProjection{Data: []byte(value), Mode: modeOrDefault(item.Mode, defaultMode)}
	}
	return payload, utilerrors.NewAggregate(errs)
}
