package volumes

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/machine"
)

// StatsPeriod is how long a pod's measured volume usage is served before it is measured again (the
// kubelet's volumeStatsAggPeriod default).
const StatsPeriod = time.Minute

// LimitedStatsPeriod is StatsPeriod for a pod whose local storage has a limit (an emptyDir sizeLimit or an
// ephemeral-storage limit, podrules.HasLocalStorageLimit): shorter than the eviction manager's 10 s pass,
// so that each pass sees the volumes as they are and a pod past its limit is evicted within seconds, not
// minutes. The walk is bounded by the limit itself: a pod past it is evicted.
const LimitedStatsPeriod = 5 * time.Second

// statsPlugins are the plugin directories whose volumes use the node's disk: their usage is measured.
var statsPlugins = []string{pluginEmptyDir, pluginConfigMap, pluginSecret, pluginDownwardAPI, pluginProjected}

// volumeStatsCache is the last measurement of each pod's volumes.
type volumeStatsCache struct {
	mu   sync.Mutex
	pods map[types.UID]measuredVolumes
}

type measuredVolumes struct {
	at    time.Time
	stats []statsapi.VolumeStats
}

// Stats is the usage of the pod's volumes that live in its directory (emptyDir, configMap, secret,
// downwardAPI, projected), as the kubelet's volume stats report them: bytes in use (blocks allocated) and
// inodes, with the capacity and free space of the filesystem holding them; and of its claimed volumes,
// with their claim (claimStats). A pod's figures are measured
// at most once per StatsPeriod, or LimitedStatsPeriod when its local storage has a limit.
func (m *Manager) Stats(uid types.UID) []statsapi.VolumeStats {
	now := m.clock().Now()
	period := StatsPeriod
	if pv := m.state(uid, false); pv != nil && pv.limited.Load() {
		period = LimitedStatsPeriod
	}
	m.statsCache.mu.Lock()
	defer m.statsCache.mu.Unlock()
	if c, ok := m.statsCache.pods[uid]; ok && now.Sub(c.at) < period {
		return c.stats
	}
	stats := m.measure(uid, now)
	if m.statsCache.pods == nil {
		m.statsCache.pods = map[types.UID]measuredVolumes{}
	}
	m.statsCache.pods[uid] = measuredVolumes{at: now, stats: stats}
	for u, c := range m.statsCache.pods { // forget pods not asked about for a while
		if now.Sub(c.at) > 10*StatsPeriod {
			delete(m.statsCache.pods, u)
		}
	}
	return stats
}

func (m *Manager) measure(uid types.UID, now time.Time) []statsapi.VolumeStats {
	dir, err := m.podDir(uid)
	if err != nil {
		return nil
	}
	var out []statsapi.VolumeStats
	for _, plugin := range statsPlugins {
		entries, err := os.ReadDir(filepath.Join(dir, "volumes", plugin))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			p := filepath.Join(dir, "volumes", plugin, e.Name())
			used, inodes := diskUsage(p)
			st := statsapi.FsStats{Time: metav1.NewTime(now), UsedBytes: &used, InodesUsed: &inodes}
			if u, err := machine.Statfs(p); err == nil {
				c, a, i, f := uint64(u.CapacityBytes), uint64(u.AvailableBytes), uint64(u.Inodes), uint64(u.InodesFree)
				st.CapacityBytes, st.AvailableBytes, st.Inodes, st.InodesFree = &c, &a, &i, &f
			}
			out = append(out, statsapi.VolumeStats{Name: e.Name(), FsStats: st})
		}
	}
	return append(out, m.claimv().claimStats(uid, now)...)
}

// diskUsage is what a directory tree takes on disk, as du measures it: allocated blocks, and inodes
// (each counted once).
func diskUsage(root string) (bytes, inodes uint64) {
	seen := map[uint64]bool{}
	_ = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil //nolint:nilerr // what cannot be read is not counted
		}
		info, err := d.Info()
		if err != nil {
			return nil //nolint:nilerr // gone meanwhile
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok || seen[st.Ino] {
			return nil
		}
		seen[st.Ino] = true
		inodes++
		bytes += uint64(st.Blocks) * 512 //nolint:gosec // a block count is never negative
		return nil
	})
	return bytes, inodes
}
