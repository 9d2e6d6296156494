package volumes

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// inUseSet is the attachable volumes of the pods on this node, by pod, and which of them the node's
// status has reported in use. A volume enters before it is mounted and leaves only once torn down.
type inUseSet struct {
	mu       sync.Mutex
	byPod    map[types.UID]map[corev1.UniqueVolumeName]bool
	reported map[corev1.UniqueVolumeName]bool
}

// add records that the pod uses the volume; it reports whether the set of volumes changed.
func (s *inUseSet) add(uid types.UID, name corev1.UniqueVolumeName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byPod == nil {
		s.byPod = map[types.UID]map[corev1.UniqueVolumeName]bool{}
	}
	isNew := !s.hasLocked(name)
	if s.byPod[uid] == nil {
		s.byPod[uid] = map[corev1.UniqueVolumeName]bool{}
	}
	s.byPod[uid][name] = true
	return isNew
}

// removePod forgets the pod's volumes (once they are unpublished and unstaged); it reports whether the
// set of volumes changed.
func (s *inUseSet) removePod(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := s.byPod[uid]
	delete(s.byPod, uid)
	gone := false
	for n := range names {
		if !s.hasLocked(n) {
			delete(s.reported, n)
			gone = true
		}
	}
	return gone
}

func (s *inUseSet) hasLocked(name corev1.UniqueVolumeName) bool {
	for _, vols := range s.byPod {
		if vols[name] {
			return true
		}
	}
	return false
}

// list is every volume in use, sorted.
func (s *inUseSet) list() []corev1.UniqueVolumeName {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []corev1.UniqueVolumeName
	for _, vols := range s.byPod {
		for n := range vols {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// markReported records the volumes the node's status now lists in volumesInUse.
func (s *inUseSet) markReported(names []corev1.UniqueVolumeName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reported = map[corev1.UniqueVolumeName]bool{}
	for _, n := range names {
		s.reported[n] = true
	}
}

func (s *inUseSet) isReported(name corev1.UniqueVolumeName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reported[name]
}

// VolumesInUse is what the node's status.volumesInUse lists: every attachable volume a pod on this node
// is to use or still has published on disk (so that after a restart or a takeover a mounted volume stays
// in use before its pod is seen again), sorted.
func (m *Manager) VolumesInUse() []corev1.UniqueVolumeName {
	names := append(m.inUse.list(), m.publishedOnDisk()...)
	slices.Sort(names)
	return slices.Compact(names)
}

// publishedOnDisk lists the attachable persistent CSI volumes published in any pod's directory.
func (m *Manager) publishedOnDisk() []corev1.UniqueVolumeName {
	dirs, err := filepath.Glob(filepath.Join(m.RootDir, "pods", "*", "volumes", pluginCSI, "*"))
	if err != nil {
		return nil
	}
	// Block volumes: their data directory, while a pod still maps them.
	blocks, _ := filepath.Glob(filepath.Join(m.blockv().csiBlockDir(), "*", blockDataDir))
	for _, b := range blocks {
		if maps, _ := os.ReadDir(filepath.Join(filepath.Dir(b), blockDevDir)); len(maps) > 0 {
			dirs = append(dirs, b)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []corev1.UniqueVolumeName
	for _, dir := range dirs {
		data, err := loadVolData(dir)
		if err != nil || data["volumeLifecycleMode"] == csiModeEphemeral {
			continue
		}
		info, err := m.csiv().driverInfo(ctx, data["driverName"])
		if err == nil && !info.attachRequired {
			continue
		}
		out = append(out, UniqueCSIVolumeName(data["driverName"], data["volumeHandle"]))
	}
	return out
}

// MarkVolumesReportedInUse is told, after each node status write, which volumes the written status
// lists in volumesInUse: only those are mounted (the attach/detach controller will not detach them).
func (m *Manager) MarkVolumesReportedInUse(names []corev1.UniqueVolumeName) {
	m.inUse.markReported(names)
}

// inUseChanged tells the node's status writer that volumesInUse changed.
func (m *Manager) inUseChanged(changed bool) {
	if changed && m.InUseChanged != nil {
		m.InUseChanged()
	}
}

// pathSet is a set of paths, safe for concurrent use.
type pathSet struct {
	mu    sync.Mutex
	paths map[string]bool
}

func (s *pathSet) add(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paths == nil {
		s.paths = map[string]bool{}
	}
	s.paths[p] = true
}

func (s *pathSet) has(p string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paths[p]
}

func (s *pathSet) remove(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.paths, p)
}

// keyedMutex serializes work on one key (a staging path): staging and publishing a volume against
// unstaging it when its last pod goes, so neither sees the other half done.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int
}

// lock locks key and returns its unlock.
func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
