package dra

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DynamicResources are the ResourceClaims the container uses and the devices prepared for them, as the pod
// resources API answers them (the kubelet's GetDynamicResources): the claims the container names in
// resources.claims in the pod's order, then the claim backing its DRA extended resources; each with every
// device its drivers prepared (driver, pool, device, share ID and that device's CDI device IDs). A claim
// not prepared on the node makes the answer empty, as the kubelet's.
func (m *Manager) DynamicResources(pod *corev1.Pod, c *corev1.Container) ([]*podresourcesapi.DynamicResource, error) {
	names, err := usedClaims(pod, c)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*podresourcesapi.DynamicResource, 0, len(names))
	for _, name := range names {
		info, ok := m.claims[key(pod.Namespace, name)]
		if !ok {
			return nil, &unknownClaimError{namespace: pod.Namespace, name: name}
		}
		dr := &podresourcesapi.DynamicResource{ClaimName: info.ClaimName, ClaimNamespace: info.Namespace}
		for _, driver := range slices.Sorted(maps.Keys(info.DriverState)) {
			for _, d := range info.DriverState[driver].Devices {
				cr := &podresourcesapi.ClaimResource{DriverName: driver, PoolName: d.PoolName, DeviceName: d.DeviceName}
				if d.ShareID != nil {
					id := string(*d.ShareID)
					cr.ShareId = &id
				}
				for _, id := range d.CDIDeviceIDs {
					cr.CdiDevices = append(cr.CdiDevices, &podresourcesapi.CDIDevice{Name: id})
				}
				dr.ClaimResources = append(dr.ClaimResources, cr)
			}
		}
		out = append(out, dr)
	}
	return out, nil
}

// usedClaims are the names of the claims the container uses: those of spec.resourceClaims it names (a
// generated claim by the name the pod's status gives it; one the pod's spec leaves out is skipped), then
// the claim backing the DRA extended resources mapped to it.
func usedClaims(pod *corev1.Pod, c *corev1.Container) ([]string, error) {
	order, _, err := containerClaims(pod, c)
	if err != nil {
		return nil, err
	}
	if ext := pod.Status.ExtendedResourceClaimStatus; ext != nil && !slices.Contains(order, ext.ResourceClaimName) {
		for _, rm := range ext.RequestMappings {
			if rm.ContainerName == c.Name {
				order = append(order, ext.ResourceClaimName)
				break
			}
		}
	}
	return order, nil
}

type unknownClaimError struct{ namespace, name string }

func (e *unknownClaimError) Error() string {
	return "unable to get claim info for claim " + e.name + " in namespace " + e.namespace
}
