package volumes

import (
	"context"
	"errors"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/machine"
)

// csiStatsTimeout bounds one NodeGetVolumeStats call.
const csiStatsTimeout = 15 * time.Second

// claimStats is the usage of the pod's claimed volumes, each with its claim, as the kubelet's plugins
// measure them: a local volume by its filesystem (statfs), a CSI volume by its driver's
// NodeGetVolumeStats where the driver offers it; a hostPath volume is not measured.
func (m claimVolumes) claimStats(uid types.UID, now time.Time) []statsapi.VolumeStats {
	pv := m.state(uid, false)
	if pv == nil {
		return nil
	}
	var out []statsapi.VolumeStats
	for name, cv := range pv.claimsSnapshot() {
		fs, ok := m.claimv().persistentFsStats(uid, cv, now)
		if !ok {
			continue
		}
		out = append(out, statsapi.VolumeStats{Name: name, FsStats: fs,
			PVCRef: &statsapi.PVCReference{Name: cv.pvc.Name, Namespace: cv.pvc.Namespace}})
	}
	return out
}

func (m claimVolumes) persistentFsStats(uid types.UID, cv *claimedVolume, now time.Time) (statsapi.FsStats, bool) {
	src := &cv.pv.Spec.PersistentVolumeSource
	path, err := m.claimv().persistentPath(uid, cv)
	if err != nil {
		return statsapi.FsStats{}, false
	}
	switch {
	case src.Local != nil:
		return statfsStats(path, now)
	case src.CSI != nil:
		return m.claimv().csiStats(src.CSI.Driver, src.CSI.VolumeHandle, path, now)
	}
	return statsapi.FsStats{}, false
}

// statfsStats is the kubelet's MetricsStatFS: the figures of the filesystem holding path.
func statfsStats(path string, now time.Time) (statsapi.FsStats, bool) {
	u, err := machine.Statfs(path)
	if err != nil {
		return statsapi.FsStats{}, false
	}
	c, a, i, f := uint64(u.CapacityBytes), uint64(u.AvailableBytes), uint64(u.Inodes), uint64(u.InodesFree) //nolint:gosec // statfs figures are never negative
	used, iused := c-a, i-f
	return statsapi.FsStats{Time: metav1.NewTime(now), CapacityBytes: &c, AvailableBytes: &a, UsedBytes: &used,
		Inodes: &i, InodesFree: &f, InodesUsed: &iused}, true
}

// csiStats asks the volume's driver, when it has the GET_VOLUME_STATS capability.
func (m claimVolumes) csiStats(driver, handle, path string, now time.Time) (statsapi.FsStats, bool) {
	client, err := m.csiv().csiClient(driver)
	if err != nil {
		return statsapi.FsStats{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), csiStatsTimeout)
	defer cancel()
	caps, err := client.NodeCapabilities(ctx)
	if err != nil || !caps[csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS] {
		return statsapi.FsStats{}, false
	}
	resp, err := client.NodeGetVolumeStats(ctx, handle, path)
	if err != nil {
		return statsapi.FsStats{}, false
	}
	fs := statsapi.FsStats{Time: metav1.NewTime(now)}
	for _, u := range resp.GetUsage() {
		total, avail, used := uint64(u.GetTotal()), uint64(u.GetAvailable()), uint64(u.GetUsed()) //nolint:gosec // usage is never negative
		switch u.GetUnit() {
		case csipb.VolumeUsage_BYTES:
			fs.CapacityBytes, fs.AvailableBytes, fs.UsedBytes = &total, &avail, &used
		case csipb.VolumeUsage_INODES:
			fs.Inodes, fs.InodesFree, fs.InodesUsed = &total, &avail, &used
		}
	}
	return fs, true
}

// The kubelet's kubelet_volume_stats_* series, one per claim used by a pod on this node.
var (
	volumeStatsLabels       = []string{"namespace", "persistentvolumeclaim"}
	volumeStatsCapacityDesc = prometheus.NewDesc("kubelet_volume_stats_capacity_bytes",
		"Capacity in bytes of the volume", volumeStatsLabels, nil)
	volumeStatsAvailableDesc = prometheus.NewDesc("kubelet_volume_stats_available_bytes",
		"Number of available bytes in the volume", volumeStatsLabels, nil)
	volumeStatsUsedDesc = prometheus.NewDesc("kubelet_volume_stats_used_bytes",
		"Number of used bytes in the volume", volumeStatsLabels, nil)
	volumeStatsInodesDesc = prometheus.NewDesc("kubelet_volume_stats_inodes",
		"Maximum number of inodes in the volume", volumeStatsLabels, nil)
	volumeStatsInodesFreeDesc = prometheus.NewDesc("kubelet_volume_stats_inodes_free",
		"Number of free inodes in the volume", volumeStatsLabels, nil)
	volumeStatsInodesUsedDesc = prometheus.NewDesc("kubelet_volume_stats_inodes_used",
		"Number of used inodes in the volume", volumeStatsLabels, nil)
)

// RegisterMetrics registers the kubelet_volume_stats_* series of the pods' claims and the volume manager's
// metrics (registerVolumeManagerMetrics). Where another manager of the same process registered the
// collectors first, that one's are served. Call it before the manager's first use.
func (m *Manager) RegisterMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	err := reg.Register(volumeStatsCollector{m})
	if _, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); !ok && err != nil {
		return err
	}
	return m.registerVolumeManagerMetrics(reg)
}

type volumeStatsCollector struct{ m *Manager }

// Describe implements prometheus.Collector.
func (c volumeStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{volumeStatsCapacityDesc, volumeStatsAvailableDesc, volumeStatsUsedDesc,
		volumeStatsInodesDesc, volumeStatsInodesFreeDesc, volumeStatsInodesUsedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: each claim once, from the pods' volume stats.
func (c volumeStatsCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[statsapi.PVCReference]bool{}
	for _, uid := range c.m.claimv().podsWithClaims() {
		for _, vs := range c.m.Stats(uid) {
			if vs.PVCRef == nil || seen[*vs.PVCRef] {
				continue
			}
			seen[*vs.PVCRef] = true
			emit := func(d *prometheus.Desc, v *uint64) {
				if v != nil {
					ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(*v), vs.PVCRef.Namespace, vs.PVCRef.Name)
				}
			}
			emit(volumeStatsCapacityDesc, vs.CapacityBytes)
			emit(volumeStatsAvailableDesc, vs.AvailableBytes)
			emit(volumeStatsUsedDesc, vs.UsedBytes)
			emit(volumeStatsInodesDesc, vs.Inodes)
			emit(volumeStatsInodesFreeDesc, vs.InodesFree)
			emit(volumeStatsInodesUsedDesc, vs.InodesUsed)
		}
	}
}

// podsWithClaims lists the pods that have a claimed volume set up.
func (m claimVolumes) podsWithClaims() []types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []types.UID
	for uid, pv := range m.pods {
		if len(pv.claimsSnapshot()) > 0 {
			out = append(out, uid)
		}
	}
	return out
}
