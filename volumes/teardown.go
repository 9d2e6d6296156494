package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
)

// mountLister is a Mounter that can list everything mounted at or beneath a directory (the real one
// can, from /proc/self/mountinfo), in mount order. TearDown then also unmounts what a container
// mounted inside a volume through Bidirectional propagation.
type mountLister interface {
	MountPointsUnder(dir string) ([]string, error)
}

// TearDown unmounts the pod's subPath bind mounts, unpublishes its CSI volumes (and unstages those no
// other pod uses), unmounts its tmpfs and local volumes and removes its volume
// directories (<pod>/volumes and <pod>/volume-subpaths); it forgets the pod's tokens. Nothing is
// removed while something is still mounted beneath. Call it once the pod's containers are stopped;
// calling it again is harmless. A UID that cannot be a path segment has nothing to tear down: no volume
// was ever set up for it.
func (m *Manager) TearDown(ctx context.Context, uid types.UID) error {
	if pv := m.state(uid, false); pv != nil {
		pv.mu.Lock()
		defer pv.mu.Unlock()
	}
	podDir, err := m.podDir(uid)
	if errors.Is(err, podrules.ErrUnsafePathSegment) {
		m.forget(uid)
		return nil
	}
	if err != nil {
		return err
	}
	// Subpath binds first: they may pin files of the volumes.
	if err := m.removeMounted(filepath.Join(podDir, subPathsDirName), "*/*/*"); err != nil {
		return err
	}
	// CSI volumes through their drivers, before anything is unmounted under them.
	if err := m.blockv().tearDownBlock(ctx, uid, podDir); err != nil {
		return err
	}
	if err := m.csiv().tearDownCSI(ctx, uid, podDir); err != nil {
		return err
	}
	if err := m.removeMounted(filepath.Join(podDir, "volumes"), "*/*"); err != nil {
		return err
	}
	if err := m.claimv().unmountLocalDevices(); err != nil {
		return err
	}
	m.forget(uid)
	return nil
}

// removeMounted unmounts everything at or beneath dir (the paths matching dir/pattern are where
// mounts are expected), checks nothing is left mounted and removes dir.
func (m *Manager) removeMounted(dir, pattern string) error {
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return nil
	}
	candidates, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return err
	}
	points, err := m.mountsUnder(dir, candidates)
	if err != nil {
		return err
	}
	for i := len(points) - 1; i >= 0; i-- {
		if err := m.mounter().Unmount(points[i]); err != nil {
			return fmt.Errorf("unmount %s: %w", points[i], err)
		}
	}
	left, err := m.mountsUnder(dir, candidates)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("cannot remove %s: %s is still mounted", dir, left[0])
	}
	return os.RemoveAll(dir)
}

// mountsUnder lists the mount points at or beneath dir: from the mounter if it can list them, else
// those of the candidates, shallowest first.
func (m *Manager) mountsUnder(dir string, candidates []string) ([]string, error) {
	if l, ok := m.mounter().(mountLister); ok {
		return l.MountPointsUnder(dir)
	}
	var points []string
	for _, c := range candidates {
		mounted, err := m.mounter().IsMountPoint(c)
		if err != nil {
			return nil, err
		}
		if mounted {
			points = append(points, c)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) < len(points[j]) })
	return points, nil
}
