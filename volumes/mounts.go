package volumes

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/podconfig"
)

// Mounts returns the CRI mounts of a container's volumeMounts, as the kubelet's makeMounts: the
// volume's host path (for a subPath or subPathExpr, expanded with env, a bind mount prepared under
// <RootDir>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>), readOnly (always for configMap,
// secret, downwardAPI and projected volumes), mount propagation (Bidirectional only for a privileged
// container), recursive read-only where the runtime supports it; no SELinux relabelling. Call it after
// SetUp made the pod's volumes ready, before creating the container.
func (m *Manager) Mounts(pod *corev1.Pod, c *corev1.Container, env map[string]string) ([]*runtimeapi.Mount, error) {
	pv := m.state(pod.UID, false)
	if pv != nil {
		pv.mu.Lock()
		defer pv.mu.Unlock()
	}
	mounts := make([]*runtimeapi.Mount, 0, len(c.VolumeMounts))
	for i := range c.VolumeMounts {
		mount, err := m.mount(pod, pv, c, i, env)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, mount)
	}
	return mounts, nil
}

// HostPath is where the pod's volume name is on the host, once SetUp made it ready (the kubelet's
// volumeutil.GetPath of the volume's mounter).
func (m *Manager) HostPath(pod *corev1.Pod, name string) (string, error) {
	vol := findVolume(pod, name)
	if vol == nil {
		return "", fmt.Errorf("the pod has no volume %q", name)
	}
	pv := m.state(pod.UID, false)
	if pv != nil {
		pv.mu.Lock()
		defer pv.mu.Unlock()
	}
	path, _, err := m.volumePath(pod, pv, vol)
	return path, err
}

func (m *Manager) mount(pod *corev1.Pod, pv *podVolumes, c *corev1.Container, index int, env map[string]string) (*runtimeapi.Mount, error) {
	vm := &c.VolumeMounts[index]
	vol := findVolume(pod, vm.Name)
	if vol == nil {
		return nil, fmt.Errorf("cannot find volume %q to mount into container %q", vm.Name, c.Name)
	}
	if vol.Image != nil {
		return imageMount(vm, vol.Image), nil
	}
	hostPath, mustReadOnly, err := m.volumePath(pod, pv, vol)
	if err != nil {
		return nil, err
	}
	subPath, err := subPathOf(vm, env)
	if err != nil {
		return nil, err
	}
	if subPath != "" {
		if hostPath, err = m.subp().prepareSubPath(pod, c.Name, index, vol.Name, hostPath, subPath); err != nil {
			return nil, err
		}
	}
	propagation, err := propagationOf(vm, c)
	if err != nil {
		return nil, err
	}
	rro, err := resolveRecursiveReadOnly(vm, m.RecursiveReadOnlyMounts)
	if err != nil {
		return nil, fmt.Errorf("failed to resolve recursive read-only mode: %w", err)
	}
	return &runtimeapi.Mount{
		ContainerPath:     vm.MountPath,
		HostPath:          hostPath,
		Readonly:          vm.ReadOnly || mustReadOnly,
		RecursiveReadOnly: rro,
		SelinuxRelabel:    false,
		Propagation:       propagation,
	}, nil
}

// imageMount is the CRI mount of an image volume: the runtime mounts the image (its subPath) read-only.
// Image holds the image as the pod names it; the caller replaces it with the pulled image's reference.
func imageMount(vm *corev1.VolumeMount, src *corev1.ImageVolumeSource) *runtimeapi.Mount {
	return &runtimeapi.Mount{ContainerPath: vm.MountPath, Readonly: true, ImageSubPath: vm.SubPath,
		Image: &runtimeapi.ImageSpec{Image: src.Reference, UserSpecifiedImage: src.Reference}}
}

func findVolume(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

// volumePath is where the volume is on the host, and whether it must be mounted read-only. A claim's
// volume is where SetUp put the volume bound to it.
func (m *Manager) volumePath(pod *corev1.Pod, pv *podVolumes, vol *corev1.Volume) (string, bool, error) {
	src := &vol.VolumeSource
	if src.HostPath != nil {
		return src.HostPath.Path, false, nil
	}
	if src.PersistentVolumeClaim != nil || src.Ephemeral != nil {
		var cv *claimedVolume
		if pv != nil {
			cv = pv.claims[vol.Name]
		}
		if cv == nil {
			return "", false, fmt.Errorf("volume %q: its claim is not set up", vol.Name)
		}
		path, err := m.claimv().persistentPath(pod.UID, cv)
		return path, cv.readOnly, err
	}
	if src.CSI != nil {
		dir, err := m.volumeDir(pod.UID, pluginCSI, vol.Name)
		return filepath.Join(dir, csiMountDir), src.CSI.ReadOnly != nil && *src.CSI.ReadOnly, err
	}
	plugin, readOnly, ok := volumePlugin(src)
	if !ok {
		return "", false, fmt.Errorf("%w %q", ErrUnsupportedVolume, sourceKind(src))
	}
	dir, err := m.volumeDir(pod.UID, plugin, vol.Name)
	return dir, readOnly, err
}

// volumePlugin is the plugin directory of a volume kept in the pod's directory, and whether containers
// mount it read-only; ok is false for other volume sources.
func volumePlugin(src *corev1.VolumeSource) (plugin string, readOnly, ok bool) {
	switch {
	case src.EmptyDir != nil, isEmptySource(src):
		return pluginEmptyDir, false, true
	case src.ConfigMap != nil:
		return pluginConfigMap, true, true
	case src.Secret != nil:
		return pluginSecret, true, true
	case src.DownwardAPI != nil:
		return pluginDownwardAPI, true, true
	case src.Projected != nil:
		return pluginProjected, true, true
	}
	return "", false, false
}

// subPathOf is the mount's subPath, or its subPathExpr expanded with the container's environment; it
// must be relative and must not step out with "..".
func subPathOf(vm *corev1.VolumeMount, env map[string]string) (string, error) {
	subPath := vm.SubPath
	if vm.SubPathExpr != "" {
		var err error
		if subPath, err = expandSubPathExpr(vm.SubPathExpr, env); err != nil {
			return "", err
		}
	}
	if subPath == "" {
		return "", nil
	}
	if filepath.IsAbs(subPath) {
		return "", fmt.Errorf("error SubPath `%s` must not be an absolute path", subPath)
	}
	if slices.Contains(strings.Split(subPath, "/"), "..") {
		return "", fmt.Errorf("unable to provision SubPath `%s`: must not contain '..'", subPath)
	}
	return subPath, nil
}

// expandSubPathExpr replaces $(VAR) with the container's environment, as the kubelet does ("$$" is a
// "$"); a variable that is unset or empty is an error.
func expandSubPathExpr(expr string, env map[string]string) (string, error) {
	missing := map[string]bool{}
	out := podconfig.Expand(expr, func(name string) string {
		if env[name] == "" {
			missing[name] = true
		}
		return env[name]
	})
	if len(missing) > 0 {
		names := make([]string, 0, len(missing))
		for n := range missing {
			names = append(names, n)
		}
		sort.Strings(names)
		return "", fmt.Errorf("missing value for %s", strings.Join(names, ", "))
	}
	return out, nil
}

var errBidirectionalUnprivileged = errors.New("mount propagation Bidirectional is only allowed in privileged containers")

// propagationOf maps mountPropagation to the CRI's (None and unset: private).
func propagationOf(vm *corev1.VolumeMount, c *corev1.Container) (runtimeapi.MountPropagation, error) {
	if vm.MountPropagation == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	}
	switch mode := *vm.MountPropagation; mode {
	case corev1.MountPropagationNone:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	case corev1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, nil
	case corev1.MountPropagationBidirectional:
		if !isPrivileged(c) {
			return 0, fmt.Errorf("volume %q: %w", vm.Name, errBidirectionalUnprivileged)
		}
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, nil
	default:
		return 0, fmt.Errorf("invalid MountPropagation mode: %q", mode)
	}
}

func isPrivileged(c *corev1.Container) bool {
	sc := c.SecurityContext
	return sc != nil && sc.Privileged != nil && *sc.Privileged
}

// resolveRecursiveReadOnly is the kubelet's: IfPossible follows the runtime's support, Enabled
// requires it; both require a read-only mount without propagation.
func resolveRecursiveReadOnly(vm *corev1.VolumeMount, supported bool) (bool, error) {
	if vm.RecursiveReadOnly == nil || *vm.RecursiveReadOnly == corev1.RecursiveReadOnlyDisabled {
		return false, nil
	}
	if !vm.ReadOnly {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not read-only", vm.Name)
	}
	if vm.MountPropagation != nil && *vm.MountPropagation != corev1.MountPropagationNone {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not compatible with propagation %q",
			vm.Name, *vm.MountPropagation)
	}
	switch mode := *vm.RecursiveReadOnly; mode {
	case corev1.RecursiveReadOnlyIfPossible:
		return supported, nil
	case corev1.RecursiveReadOnlyEnabled:
		if !supported {
			return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not supported by the runtime", vm.Name)
		}
		return true, nil
	default:
		return false, fmt.Errorf("unknown recursive read-only mode %q", mode)
	}
}
