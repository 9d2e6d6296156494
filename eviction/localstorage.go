package eviction

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/podrules"
)

// The eviction_signal labels of kubelet_evictions for the local storage limits (the kubelet's).
const (
	signalEmptyDirFsLimit           = "emptydirfs.limit"
	signalEphemeralPodFsLimit       = "ephemeralpodfs.limit"
	signalEphemeralContainerFsLimit = "ephemeralcontainerfs.limit"
)

// The kubelet's messages of a local storage eviction.
const (
	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q. "
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
)

// overLimit finds a local storage limit a pod exceeds: the signal it is counted under and the eviction
// message; ok is false when the pod is within every limit it checks.
type overLimit func(pod *corev1.Pod, s statsapi.PodStats) (signal, msg string, ok bool)

// localStorageEviction is the kubelet's local storage isolation: every pod with stats that uses more than
// an emptyDir's sizeLimit, its ephemeral-storage limit or a container's is evicted at once (grace period
// 1 s, reason Evicted, no DisruptionTarget condition and no event annotations, as the kubelet), checked
// in that order. It returns the pods evicted.
func (m *Manager) localStorageEviction(ctx context.Context, pods []*corev1.Pod, stats podStats) []*corev1.Pod {
	checks := []overLimit{emptyDirOverLimit, podOverLimit, containerOverLimit(m.dedicatedImageFs(ctx))}
	var evicted []*corev1.Pod
	for _, pod := range pods {
		s, ok := stats(pod.UID)
		if !ok {
			continue
		}
		for _, check := range checks {
			signal, msg, over := check(pod, s)
			if over && m.evict(ctx, pod, hardEvictionGracePeriod, msg, nil, nil) {
				m.metrics.evictions.WithLabelValues(signal).Inc()
				evicted = append(evicted, pod)
				break
			}
		}
	}
	return evicted
}

// emptyDirOverLimit: the first emptyDir whose measured usage exceeds its positive sizeLimit. A
// memory-backed one never does: its tmpfs is no larger than its sizeLimit.
func emptyDirOverLimit(pod *corev1.Pod, s statsapi.PodStats) (string, string, bool) {
	used := make(map[string]*resource.Quantity, len(s.VolumeStats))
	for _, v := range s.VolumeStats {
		if v.UsedBytes != nil {
			used[v.Name] = bytesQuantity(*v.UsedBytes)
		}
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.EmptyDir == nil {
			continue
		}
		size, u := emptyDirSizeLimit(v), used[v.Name]
		if u != nil && size != nil && u.Cmp(*size) > 0 {
			return signalEmptyDirFsLimit, fmt.Sprintf(emptyDirMessageFmt, v.Name, size.String()), true
		}
	}
	return "", "", false
}

// emptyDirSizeLimit is the volume's positive emptyDir sizeLimit, nil when it is no emptyDir or has none.
func emptyDirSizeLimit(v *corev1.Volume) *resource.Quantity {
	if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Sign() <= 0 {
		return nil
	}
	return v.EmptyDir.SizeLimit
}

// podEphemeralStorageLimit is the pod's ephemeral-storage limit (podrules.PodLimits), when it has one.
func podEphemeralStorageLimit(pod *corev1.Pod) (resource.Quantity, bool) {
	limit, found := podrules.PodLimits(pod, podrules.ResourceOptions{})[corev1.ResourceEphemeralStorage]
	return limit, found
}

// podOverLimit: the pod's local ephemeral storage (the summary's: writable layers, logs, local ephemeral
// volumes) above its ephemeral-storage limit (podrules.PodLimits), when it has one.
func podOverLimit(pod *corev1.Pod, s statsapi.PodStats) (string, string, bool) {
	limit, found := podEphemeralStorageLimit(pod)
	if !found {
		return "", "", false
	}
	usage := bytesQuantity(0)
	if es := s.EphemeralStorage; es != nil && es.UsedBytes != nil {
		usage = bytesQuantity(*es.UsedBytes)
	}
	if usage.Cmp(limit) > 0 {
		return signalEphemeralPodFsLimit, fmt.Sprintf(podEphemeralStorageMessageFmt, limit.String()), true
	}
	return "", "", false
}

// containerOverLimit: the first container (or sidecar) with a non-zero ephemeral-storage limit whose logs
// and — unless the image filesystem is dedicated — writable layer use more than it.
func containerOverLimit(dedicatedImageFs bool) overLimit {
	return func(pod *corev1.Pod, s statsapi.PodStats) (string, string, bool) {
		limits := containerStorageLimits(pod)
		for _, c := range s.Containers {
			limit, ok := limits[c.Name]
			if !ok {
				continue
			}
			used := bytesQuantity(fsBytes(c.Logs))
			if !dedicatedImageFs {
				used.Add(*bytesQuantity(fsBytes(c.Rootfs)))
			}
			if limit.Cmp(*used) < 0 {
				return signalEphemeralContainerFsLimit, fmt.Sprintf(containerEphemeralStorageMessageFmt, c.Name, limit.String()), true
			}
		}
		return "", "", false
	}
}

// containerStorageLimits are the non-zero ephemeral-storage limits of the pod's containers and sidecars,
// by name.
func containerStorageLimits(pod *corev1.Pod) map[string]resource.Quantity {
	out := map[string]resource.Quantity{}
	add := func(c *corev1.Container) {
		if l := c.Resources.Limits.StorageEphemeral(); l.Value() != 0 {
			out[c.Name] = *l
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		if podrules.IsSidecar(&pod.Spec.InitContainers[i]) {
			add(&pod.Spec.InitContainers[i])
		}
	}
	return out
}

func bytesQuantity(v uint64) *resource.Quantity {
	return resource.NewQuantity(int64(v), resource.BinarySI) //nolint:gosec // byte counts fit in int64
}

// fsBytes is a filesystem's bytes used (0 when unknown).
func fsBytes(fs *statsapi.FsStats) uint64 {
	if fs == nil || fs.UsedBytes == nil {
		return 0
	}
	return *fs.UsedBytes
}
