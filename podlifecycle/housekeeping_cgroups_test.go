package podlifecycle

import (
	"context"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podsyncer"
)

// cgroupRemovals records which pod cgroups housekeeping removes.
type cgroupRemovals struct {
	mu      sync.Mutex
	removed []string
	listed  []types.UID
}

func (c *cgroupRemovals) Ensure(string, podrules.PodCgroup) error { return nil }
func (c *cgroupRemovals) UpdateQoS(int64) error                   { return nil }
func (c *cgroupRemovals) List() []types.UID                       { return c.listed }
func (c *cgroupRemovals) Remove(uid types.UID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removed = append(c.removed, "remove "+string(uid))
	return nil
}

func TestOrphanedPodCgroupsAreRemoved(t *testing.T) {
	cg := &cgroupRemovals{listed: []types.UID{"desired", "running", "tracked", "orphan"}}
	r := newTestReconciler(t, Deps{PodCgroups: cg}, Options{})
	r.workers = map[types.UID]*podWorker{"tracked": {PodState: podsyncer.NewPodState("tracked", types.NamespacedName{})}}
	h := &housekeeping{r: r}
	h.removeOrphanedCgroups(context.Background(), map[types.UID]bool{"desired": true}, map[types.UID]bool{"running": true})
	if got := strings.Join(cg.removed, ", "); got != "remove orphan" {
		t.Errorf("calls %q, want only the orphan's cgroup removed", got)
	}
}
