package volumes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// defaultFileMode is the API default of defaultMode.
const defaultFileMode int32 = 0o644

// projectedVolume is where an atomically written volume lives and on what.
type projectedVolume struct {
	plugin string
	tmpfs  bool // secret, downwardAPI and projected volumes are memory-backed, as in the kubelet
}

var (
	configMapVolume   = projectedVolume{plugin: pluginConfigMap}
	secretVolume      = projectedVolume{plugin: pluginSecret, tmpfs: true}
	downwardAPIVolume = projectedVolume{plugin: pluginDownwardAPI, tmpfs: true}
	projectionVolume  = projectedVolume{plugin: pluginProjected, tmpfs: true}
)

func (m sourceVolumes) setUpConfigMap(ctx context.Context, pod *corev1.Pod, name string, src *corev1.ConfigMapVolumeSource) error {
	payload, err := m.srcv().configMapPayload(ctx, pod.Namespace, src.Name, src.Items, src.Optional, modeOr(src.DefaultMode))
	if err != nil {
		return err
	}
	return m.srcv().writeVolume(pod, name, configMapVolume, payload)
}

func (m sourceVolumes) setUpSecret(ctx context.Context, pod *corev1.Pod, name string, src *corev1.SecretVolumeSource) error {
	payload, err := m.srcv().secretPayload(ctx, pod.Namespace, src.SecretName, src.Items, src.Optional, modeOr(src.DefaultMode))
	if err != nil {
		return err
	}
	return m.srcv().writeVolume(pod, name, secretVolume, payload)
}

func (m sourceVolumes) setUpDownwardAPI(pod *corev1.Pod, name string, src *corev1.DownwardAPIVolumeSource) error {
	payload, err := downwardAPIPayload(pod, src.Items, modeOr(src.DefaultMode), m.allocatable)
	if err != nil {
		return err
	}
	return m.srcv().writeVolume(pod, name, downwardAPIVolume, payload)
}

// writeVolume prepares the volume's directory (on tmpfs if asked), the mount points of volumes nested
// beneath it in a container, and writes the payload atomically; fsGroup ownership is applied to what
// is written, before it is published.
func (m sourceVolumes) writeVolume(pod *corev1.Pod, name string, kind projectedVolume, payload map[string]fileProjection) error {
	dir, err := m.volumeDir(pod.UID, kind.plugin, name)
	if err != nil {
		return err
	}
	if kind.tmpfs {
		_, err = m.srcv().ensureTmpfs(dir, func() int64 { return m.srcv().memorySize(pod, nil) })
	} else {
		_, err = ensureDir(dir, emptyDirPerm)
	}
	if err != nil {
		return err
	}
	if err := makeNestedMountpoints(name, dir, pod); err != nil {
		return err
	}
	w := &atomicWriter{dir: dir, now: m.clock().Now}
	_, err = w.Write(payload, func() error {
		return setVolumeOwnership(dir, fsGroup(pod), nil, true)
	})
	if err != nil {
		return fmt.Errorf("write volume %s: %w", name, err)
	}
	return nil
}

func fsGroup(pod *corev1.Pod) *int64 {
	if pod.Spec.SecurityContext == nil {
		return nil
	}
	return pod.Spec.SecurityContext.FSGroup
}

func modeOr(mode *int32) int32 {
	if mode == nil {
		return defaultFileMode
	}
	return *mode
}

// configMapPayload fetches the ConfigMap and maps its keys to files: every key (data and binaryData)
// with defaultMode, or only the listed items with their path and mode. A missing optional ConfigMap
// or key gives no file; a missing required one is an error.
func (m sourceVolumes) configMapPayload(ctx context.Context, namespace, name string, items []corev1.KeyToPath, optional *bool, defaultMode int32) (map[string]fileProjection, error) {
	cm, err := m.Objects.GetConfigMap(ctx, namespace, name)
	if err != nil {
		if !apierrors.IsNotFound(err) || !isTrue(optional) {
			return nil, err
		}
		cm = &corev1.ConfigMap{}
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keysToFiles(data, items, defaultMode, isTrue(optional), "configmap references non-existent config key: ")
}

// secretPayload is configMapPayload for a Secret.
func (m sourceVolumes) secretPayload(ctx context.Context, namespace, name string, items []corev1.KeyToPath, optional *bool, defaultMode int32) (map[string]fileProjection, error) {
	secret, err := m.Objects.GetSecret(ctx, namespace, name)
	if err != nil {
		if !apierrors.IsNotFound(err) || !isTrue(optional) {
			return nil, err
		}
		secret = &corev1.Secret{}
	}
	return keysToFiles(secret.Data, items, defaultMode, isTrue(optional), "references non-existent secret key: ")
}

func keysToFiles(data map[string][]byte, items []corev1.KeyToPath, defaultMode int32, optional bool, missing string) (map[string]fileProjection, error) {
	payload := make(map[string]fileProjection, len(data))
	if len(items) == 0 {
		for k, v := range data {
			payload[k] = fileProjection{Data: v, Mode: defaultMode}
		}
		return payload, nil
	}
	for _, item := range items {
		v, ok := data[item.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s%s", missing, item.Key)
		}
		payload[item.Path] = fileProjection{Data: v, Mode: modeOrDefault(item.Mode, defaultMode)}
	}
	return payload, nil
}

func modeOrDefault(mode *int32, def int32) int32 {
	if mode == nil {
		return def
	}
	return *mode
}

func isTrue(b *bool) bool { return b != nil && *b }

// makeNestedMountpoints creates, in the volume at dir, the directories where other volumes are mounted
// beneath it in a container, so the runtime can mount them into a read-only volume (the kubelet's
// MakeNestedMountpoints).
func makeNestedMountpoints(name, dir string, pod *corev1.Pod) error {
	nested, err := nestedMountpoints(name, pod)
	if err != nil {
		return err
	}
	for _, n := range nested {
		if err := os.MkdirAll(filepath.Join(dir, n), 0o755); err != nil {
			return fmt.Errorf("unable to create nested volume mountpoints: %w", err)
		}
	}
	return nil
}

func nestedMountpoints(name string, pod *corev1.Pod) ([]string, error) {
	var out []string
	for _, mounts := range allVolumeMounts(pod) {
		nested, err := nestedIn(name, mounts)
		if err != nil {
			return nil, err
		}
		out = append(out, nested...)
	}
	return out, nil
}

// nestedIn lists, for each place one container mounts the volume, the mount points directly beneath it.
func nestedIn(name string, mounts []corev1.VolumeMount) ([]string, error) {
	all := make([]string, 0, len(mounts))
	for _, vm := range mounts {
		all = append(all, filepath.Clean(vm.MountPath))
	}
	sort.Strings(all)
	var out []string
	for _, vm := range mounts {
		if vm.Name != name {
			continue
		}
		mine := filepath.Clean(vm.MountPath)
		if strings.HasPrefix(mine, "../") {
			return nil, fmt.Errorf("invalid container mount point %v", mine)
		}
		out = append(out, directlyBeneath(mine+"/", all)...)
	}
	return out, nil
}

// directlyBeneath returns the paths under prefix (relative to it), skipping those under another one.
func directlyBeneath(prefix string, sorted []string) []string {
	var out, seen []string
	for _, mp := range sorted {
		if !strings.HasPrefix(mp, prefix) || hasAnyPrefix(mp, seen) {
			continue
		}
		seen = append(seen, mp+"/")
		out = append(out, mp[len(prefix):])
	}
	return out
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// allVolumeMounts lists the volume mounts of each container of the pod (init, regular, ephemeral).
func allVolumeMounts(pod *corev1.Pod) [][]corev1.VolumeMount {
	var out [][]corev1.VolumeMount
	for _, c := range pod.Spec.InitContainers {
		out = append(out, c.VolumeMounts)
	}
	for _, c := range pod.Spec.Containers {
		out = append(out, c.VolumeMounts)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		out = append(out, c.VolumeMounts)
	}
	return out
}
