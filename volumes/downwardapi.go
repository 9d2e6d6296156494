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
// be resolved is an error (all of them, aggregated) and fails the volume. alloc is asked for the node's
// allocatable only when an item reads a resource, once.
func downwardAPIPayload(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defaultMode int32, alloc func() corev1.ResourceList) (map[string]fileProjection, error) {
	payload := make(map[string]fileProjection, len(items))
	var errs []error
	var allocatable corev1.ResourceList
	allocRead := false
	for _, item := range items {
		var value string
		var err error
		switch {
		case item.FieldRef != nil:
			value, err = podconfig.PodMetadataField(pod, item.FieldRef.FieldPath)
		case item.ResourceFieldRef != nil:
			if !allocRead {
				allocatable, allocRead = alloc(), true
			}
			value, err = podrules.VolumeResourceValue(pod, item.ResourceFieldRef, allocatable)
		}
		if err != nil {
			errs = append(errs, err)
		}
		payload[filepath.Clean(item.Path)] = fileProjection{Data: []byte(value), Mode: modeOrDefault(item.Mode, defaultMode)}
	}
	return payload, utilerrors.NewAggregate(errs)
}
