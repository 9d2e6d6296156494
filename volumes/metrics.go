package volumes

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// The plugin names of the kubelet's volume plugins, as its metrics label them.
const (
	pluginNameEmptyDir    = "kubernetes.io/empty-dir"
	pluginNameHostPath    = "kubernetes.io/host-path"
	pluginNameConfigMap   = "kubernetes.io/configmap"
	pluginNameSecret      = "kubernetes.io/secret"
	pluginNameDownwardAPI = "kubernetes.io/downward-api"
	pluginNameProjected   = "kubernetes.io/projected"
	pluginNameLocal       = "kubernetes.io/local-volume"
	pluginNameImage       = "kubernetes.io/image"
)

// The kubelet's operation names of storage_operation_duration_seconds that nodelet records.
const (
	opVolumeMount   = "volume_mount"
	opVolumeUnmount = "volume_unmount"
	opMountDevice   = "mount_device"
	opUnmountDevice = "unmount_device"
	opExpandVolume  = "volume_fs_resize"
)

// storageOperationBuckets are the kubelet's buckets of storage_operation_duration_seconds.
var storageOperationBuckets = []float64{.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600}

// volumeMetrics are the kubelet's volume manager metrics that nodelet records.
type volumeMetrics struct {
	// operations is storage_operation_duration_seconds{volume_plugin,operation_name,status,migrated}.
	operations *prometheus.HistogramVec
}

// totalVolumesDesc is the kubelet's volume_manager_total_volumes{plugin_name,state}.
var totalVolumesDesc = prometheus.NewDesc("volume_manager_total_volumes", "Number of volumes in Volume Manager",
	[]string{"plugin_name", "state"}, nil)

// registerVolumeManagerMetrics registers the kubelet's volume manager metrics with reg:
// storage_operation_duration_seconds (mounts of pod volumes — each set-up of a volume, and every refresh of
// a configMap, secret, downward API or projected volume —, CSI stages, unstages and unpublishes and node
// expansions; by plugin, operation and success) and volume_manager_total_volumes (the volumes of the pods
// being run that containers use, by plugin: "desired_state_of_world" once their plugin is known,
// "actual_state_of_world" once set up). Managers of one process share the histogram; the volume counts
// served are the first manager's.
func (m *Manager) registerVolumeManagerMetrics(reg prometheus.Registerer) error {
	ops := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "storage_operation_duration_seconds",
		Help: "Storage operation duration", Buckets: storageOperationBuckets},
		[]string{"volume_plugin", "operation_name", "status", "migrated"})
	if err := reg.Register(ops); err != nil {
		are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err)
		if !ok {
			return fmt.Errorf("register storage_operation_duration_seconds: %w", err)
		}
		if ops, ok = are.ExistingCollector.(*prometheus.HistogramVec); !ok {
			return fmt.Errorf("register storage_operation_duration_seconds: %w", err)
		}
	}
	m.metrics = &volumeMetrics{operations: ops}
	if err := reg.Register(totalVolumes{m}); err != nil {
		if _, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); !ok {
			return fmt.Errorf("register volume_manager_total_volumes: %w", err)
		}
	}
	return nil
}

// observeOp records one storage operation of plugin that began at start.
func (m *Manager) observeOp(plugin, op string, start time.Time, err error) {
	if m.metrics == nil || plugin == "" {
		return
	}
	status := "success"
	if err != nil {
		status = "fail-unknown"
	}
	m.metrics.operations.WithLabelValues(plugin, op, status, "false").Observe(m.clock().Since(start).Seconds())
}

// volumePluginName is the kubelet's fully qualified plugin name of a pod volume ("kubernetes.io/csi:<driver>"
// for CSI); a claim's is its PersistentVolume's, "" while the claim is not resolved.
func volumePluginName(vol *corev1.Volume, claim *claimedVolume) string {
	switch src := &vol.VolumeSource; {
	case src.EmptyDir != nil, isEmptySource(src):
		return pluginNameEmptyDir
	case src.HostPath != nil:
		return pluginNameHostPath
	case src.ConfigMap != nil:
		return pluginNameConfigMap
	case src.Secret != nil:
		return pluginNameSecret
	case src.DownwardAPI != nil:
		return pluginNameDownwardAPI
	case src.Projected != nil:
		return pluginNameProjected
	case src.Image != nil:
		return pluginNameImage
	case src.CSI != nil:
		return csiQualifiedPluginName(src.CSI.Driver)
	case src.PersistentVolumeClaim != nil, src.Ephemeral != nil:
		if claim == nil || claim.pv == nil {
			return ""
		}
		switch pvs := &claim.pv.Spec.PersistentVolumeSource; {
		case pvs.HostPath != nil:
			return pluginNameHostPath
		case pvs.Local != nil:
			return pluginNameLocal
		case pvs.CSI != nil:
			return csiQualifiedPluginName(pvs.CSI.Driver)
		}
	}
	return ""
}

func csiQualifiedPluginName(driver string) string { return csiPluginName + ":" + driver }

// remountedEachSync: the kubelet's plugins that require a remount, whose contents are refreshed on every
// sync of the pod (each refresh is a volume_mount operation).
func remountedEachSync(plugin string) bool {
	switch plugin {
	case pluginNameConfigMap, pluginNameSecret, pluginNameDownwardAPI, pluginNameProjected:
		return true
	}
	return false
}

// podVolumeState is one volume of a pod as its last SetUp left it.
type podVolumeState struct {
	plugin  string
	mounted bool
}

// totalVolumes collects volume_manager_total_volumes from the pods' last SetUp.
type totalVolumes struct{ m *Manager }

// Describe is prometheus.Collector's.
func (c totalVolumes) Describe(ch chan<- *prometheus.Desc) { ch <- totalVolumesDesc }

// Collect is prometheus.Collector's.
func (c totalVolumes) Collect(ch chan<- prometheus.Metric) {
	desired, actual := map[string]int{}, map[string]int{}
	c.m.mu.Lock()
	for _, pv := range c.m.pods {
		if p := pv.volumes.Load(); p != nil {
			for _, v := range *p {
				desired[v.plugin]++
				if v.mounted {
					actual[v.plugin]++
				}
			}
		}
	}
	c.m.mu.Unlock()
	for state, counts := range map[string]map[string]int{"desired_state_of_world": desired, "actual_state_of_world": actual} {
		for plugin, n := range counts {
			ch <- prometheus.MustNewConstMetric(totalVolumesDesc, prometheus.GaugeValue, float64(n), plugin, state)
		}
	}
}
