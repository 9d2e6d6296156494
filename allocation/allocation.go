package allocation

import (
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
)

// Manager keeps the allocated and actuated resources of the node's pods and their resize conditions. It
// is safe for concurrent use.
type Manager struct {
	mu        sync.Mutex
	allocated *store
	actuated  *store
	resizes   map[types.UID]*resizeConditions
	pending   []types.UID // resizes waiting for room, in no particular order (see PendingResizes)
}

// New reads the records of rootDir (the kubelet's checkpoint files there). An empty rootDir keeps them in
// memory only. A corrupt file is an error naming it: the node's pods cannot be trusted to what it said.
func New(rootDir string) (*Manager, error) {
	var allocPath, actPath string
	if rootDir != "" {
		allocPath, actPath = filepath.Join(rootDir, AllocatedStateFile), filepath.Join(rootDir, ActuatedStateFile)
	}
	alloc, err := loadStore(allocPath)
	if err != nil {
		return nil, err
	}
	act, err := loadStore(actPath)
	if err != nil {
		return nil, err
	}
	return &Manager{allocated: alloc, actuated: act, resizes: map[types.UID]*resizeConditions{}}, nil
}

// InMemory is a Manager that keeps its records in memory only.
func InMemory() *Manager {
	m, _ := New("") // without files nothing can fail
	return m
}

// resizableContainers are the containers whose resources a resize may change: every container and init
// container (sidecar or not), never an ephemeral one.
func resizableContainers(pod *corev1.Pod) []*corev1.Container {
	out := make([]*corev1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// specResources is what the allocation record keeps of a pod's spec.
func specResources(pod *corev1.Pod) PodResources {
	e := PodResources{ContainerResources: map[string]corev1.ResourceRequirements{}}
	for _, c := range resizableContainers(pod) {
		e.ContainerResources[c.Name] = *c.Resources.DeepCopy()
	}
	if pod.Spec.Resources != nil {
		e.PodLevelResources = pod.Spec.Resources.DeepCopy()
	}
	return e
}

// PodWithAllocation is the pod with the resources it was admitted with in place of those its spec asks
// for: what its sync, its cgroups, its status and the admission of other pods go by. changed is false
// (and the pod itself returned) when they are the same, or the pod has no allocation yet.
func (m *Manager) PodWithAllocation(pod *corev1.Pod) (_ *corev1.Pod, changed bool) {
	m.mu.Lock()
	e, ok := m.allocated.entries[pod.UID]
	m.mu.Unlock()
	if !ok {
		return pod, false
	}
	return withResources(pod, e)
}

// withResources is pod with e's resources (a copy when they differ).
func withResources(pod *corev1.Pod, e PodResources) (*corev1.Pod, bool) {
	var out *corev1.Pod
	for i, c := range resizableContainers(pod) {
		res, ok := e.ContainerResources[c.Name]
		if !ok || equality.Semantic.DeepEqual(res, c.Resources) {
			continue
		}
		if out == nil {
			out = pod.DeepCopy()
		}
		resizableContainers(out)[i].Resources = *res.DeepCopy()
	}
	if e.PodLevelResources != nil && pod.Spec.Resources != nil && !equality.Semantic.DeepEqual(*e.PodLevelResources, *pod.Spec.Resources) {
		if out == nil {
			out = pod.DeepCopy()
		}
		out.Spec.Resources = e.PodLevelResources.DeepCopy()
	}
	if out == nil {
		return pod, false
	}
	return out, true
}

// HasAllocation reports whether the pod was admitted here (its allocation is recorded).
func (m *Manager) HasAllocation(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.allocated.entries[uid]
	return ok
}

// ResizeRequested reports whether the pod's spec asks for other resources than its allocation.
func (m *Manager) ResizeRequested(pod *corev1.Pod) bool {
	_, changed := m.PodWithAllocation(pod)
	return changed
}

// Allocate records the pod's spec resources as its allocation: on admission, and when a resize is
// accepted.
func (m *Manager) Allocate(pod *corev1.Pod) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.allocated.set(pod.UID, specResources(pod)) {
		return nil
	}
	return m.allocated.save()
}

// Actuated is the resources last applied to the runtime for the pod's container (its limits the effective
// ones: the pod-level limit where the container sets none); ok is false when none were recorded.
func (m *Manager) Actuated(uid types.UID, container string) (corev1.ResourceRequirements, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.actuated.entries[uid]
	if !ok {
		return corev1.ResourceRequirements{}, false
	}
	r, ok := e.ContainerResources[container]
	return r, ok
}

// SetActuated records the resources the container of the (allocated) pod now runs with: after it is
// created, and after each update applied to it.
func (m *Manager) SetActuated(pod *corev1.Pod, c *corev1.Container) error {
	return m.updateActuated(pod.UID, func(e *PodResources) { e.ContainerResources[c.Name] = EffectiveResources(pod, c) })
}

// updateActuated changes a copy of the pod's actuated record with change and writes it when it differs.
func (m *Manager) updateActuated(uid types.UID, change func(*PodResources)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := PodResources{ContainerResources: map[string]corev1.ResourceRequirements{}}
	if old, ok := m.actuated.entries[uid]; ok {
		for name, r := range old.ContainerResources {
			e.ContainerResources[name] = r
		}
		e.PodLevelResources = old.PodLevelResources
	}
	change(&e)
	if !m.actuated.set(uid, e) {
		return nil
	}
	return m.actuated.save()
}

// ActuatedPodLevel is the pod-level resources last applied to the pod's cgroup; ok is false when none were
// recorded (a pod without pod-level resources, or no record yet).
func (m *Manager) ActuatedPodLevel(uid types.UID) (*corev1.ResourceRequirements, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.actuated.entries[uid]
	if !ok || e.PodLevelResources == nil {
		return nil, false
	}
	return e.PodLevelResources.DeepCopy(), true
}

// SetActuatedPodLevel records the (allocated) pod's pod-level resources as applied to its cgroup: when the
// pod cgroup is made, and after a pod-level resize reached it. A pod without pod-level resources keeps no
// record.
func (m *Manager) SetActuatedPodLevel(pod *corev1.Pod) error {
	if pod.Spec.Resources == nil {
		return nil
	}
	return m.updateActuated(pod.UID, func(e *PodResources) { e.PodLevelResources = pod.Spec.Resources.DeepCopy() })
}

// EffectiveResources are the container's resources with its cpu and memory limits as its cgroup is given
// them (podrules.ContainerLimit: the pod-level limit for one the container leaves unset or zero).
func EffectiveResources(pod *corev1.Pod, c *corev1.Container) corev1.ResourceRequirements {
	r := *c.Resources.DeepCopy()
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		lim := podrules.ContainerLimit(pod, c, name)
		if cur := r.Limits[name]; lim.IsZero() || lim.Cmp(cur) == 0 {
			continue
		}
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		r.Limits[name] = lim.DeepCopy()
	}
	return r
}

// Remove forgets a pod that left the node: its records (written with the next change, as the kubelet
// does) and its resize conditions.
func (m *Manager) Remove(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.allocated.entries, uid)
	delete(m.actuated.entries, uid)
	delete(m.resizes, uid)
	m.dropPendingLocked(uid)
}

// RemoveOrphans forgets every pod keep does not know (records a restart finds of pods gone meanwhile).
func (m *Manager) RemoveOrphans(keep func(types.UID) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range []*store{m.allocated, m.actuated} {
		for uid := range s.entries {
			if !keep(uid) {
				delete(s.entries, uid)
			}
		}
	}
}
