package eviction

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// isolated is a configuration with localStorageCapacityIsolation and, optionally, evictionHard.
func isolated(hard map[string]string) *kubeletconfigv1beta1.KubeletConfiguration {
	return &kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: hard, LocalStorageCapacityIsolation: ptr.To(true)}
}

// withEmptyDir gives the pod an emptyDir named name with a sizeLimit.
func withEmptyDir(p *corev1.Pod, name string, medium corev1.StorageMedium, sizeLimit string) *corev1.Pod {
	q := resource.MustParse(sizeLimit)
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium, SizeLimit: &q}}})
	return p
}

// storagePod is a pod whose containers have these ephemeral-storage limits ("" for none).
func storagePod(name string, limits ...string) *corev1.Pod {
	p := pod(name, 0, "")
	p.Spec.Containers = nil
	for i, l := range limits {
		c := corev1.Container{Name: "c" + string(rune('0'+i))}
		if l != "" {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(l)}
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	return p
}

// volumeUse sets a pod's measured volume usage.
func volumeUse(name string, bytes int64) func(*statsapi.PodStats) {
	return func(s *statsapi.PodStats) {
		s.VolumeStats = append(s.VolumeStats, statsapi.VolumeStats{Name: name, FsStats: statsapi.FsStats{UsedBytes: u64(bytes)}})
	}
}

// containerUse sets container i's writable layer and log usage.
func containerUse(i int, rootfs, logs int64) func(*statsapi.PodStats) {
	return func(s *statsapi.PodStats) {
		s.Containers[i].Rootfs = &statsapi.FsStats{UsedBytes: u64(rootfs)}
		s.Containers[i].Logs = &statsapi.FsStats{UsedBytes: u64(logs)}
	}
}

// podUse sets the pod's summary ephemeral storage.
func podUse(bytes int64) func(*statsapi.PodStats) {
	return func(s *statsapi.PodStats) { s.EphemeralStorage = &statsapi.FsStats{UsedBytes: u64(bytes)} }
}

// checkLocalStorageKill checks the kubelet's local storage eviction of one pod: grace 1 s, Failed/Evicted
// with msg, no condition, an Evicted event without annotations, counted under signal.
func checkLocalStorageKill(t *testing.T, m *Manager, node *fakeNode, ev *events, name, msg, signal string) {
	t.Helper()
	var k *kill
	for i := range node.kills {
		if node.kills[i].pod == name {
			k = &node.kills[i]
		}
	}
	if k == nil {
		t.Fatalf("%s not evicted: kills %+v", name, node.kills)
	}
	if k.grace != 1 || k.reason != "Evicted" || k.message != msg || k.condition != nil {
		t.Errorf("kill = %+v\nwant grace 1, Evicted, %q, no condition", *k, msg)
	}
	if want := "Warning Evicted " + msg + " map[]"; !strings.Contains(strings.Join(ev.list, "\n"), want) {
		t.Errorf("events %q lack %q", ev.list, want)
	}
	if v := testutil.ToFloat64(m.metrics.evictions.WithLabelValues(signal)); v < 1 {
		t.Errorf("kubelet_evictions{eviction_signal=%q} = %v", signal, v)
	}
}

func TestEmptyDirSizeLimit(t *testing.T) {
	m, node, ev, _ := newTestManager(t, isolated(nil))
	over := withEmptyDir(pod("over", 0, ""), "scratch", "", "10Mi")
	under := withEmptyDir(pod("under", 0, ""), "scratch", "", "10Mi")
	unlimited := pod("unlimited", 0, "")
	unlimited.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	node.set(func(n *fakeNode) {
		n.pods = []*corev1.Pod{under, unlimited, over}
		n.podFs["under"] = volumeUse("scratch", 10*mi) // at the limit is within it
		n.podFs["unlimited"] = volumeUse("scratch", gi)
		n.podFs["over"] = volumeUse("scratch", 10*mi+1)
	})
	got := pass(t, m, node, 10*time.Second)
	if len(got) != 1 || got[0].Name != "over" {
		t.Fatalf("evicted %v, want over", podNames(got))
	}
	checkLocalStorageKill(t, m, node, ev, "over", `Usage of EmptyDir volume "scratch" exceeds the limit "10Mi". `, "emptydirfs.limit")
	if len(m.NodeConditions()) != 0 {
		t.Errorf("a pod over its limit puts no pressure on the node: %v", m.NodeConditions())
	}
}

func TestPodEphemeralStorageLimit(t *testing.T) {
	m, node, ev, _ := newTestManager(t, isolated(nil))
	// The pod's limit is the sum of its containers' (100Mi + 50Mi); a container without one adds nothing.
	over, under := storagePod("over", "100Mi", "50Mi", ""), storagePod("under", "100Mi", "50Mi", "")
	node.set(func(n *fakeNode) {
		n.pods = []*corev1.Pod{under, over}
		n.podFs["under"] = podUse(150 * mi)
		n.podFs["over"] = podUse(150*mi + 1)
	})
	if got := pass(t, m, node, 10*time.Second); len(got) != 1 || got[0].Name != "over" {
		t.Fatalf("evicted %v, want over", podNames(got))
	}
	checkLocalStorageKill(t, m, node, ev, "over", "Pod ephemeral local storage usage exceeds the total limit of containers 150Mi. ", "ephemeralpodfs.limit")
}

func TestContainerEphemeralStorageLimit(t *testing.T) {
	m, node, ev, _ := newTestManager(t, isolated(nil))
	over, under := storagePod("over", "", "100Mi"), storagePod("under", "", "100Mi")
	side := storagePod("side", "")
	side.Spec.InitContainers = []corev1.Container{{Name: "log", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Mi")}}}}
	node.set(func(n *fakeNode) {
		n.pods = []*corev1.Pod{under, over, side}
		n.podFs["under"] = containerUse(1, 90*mi, 10*mi)  // writable layer + logs = the limit
		n.podFs["over"] = containerUse(1, 90*mi, 10*mi+1) // one byte past it
		n.podFs["side"] = func(s *statsapi.PodStats) {    // the sidecar's stats come with the containers'
			s.Containers = append(s.Containers, statsapi.ContainerStats{Name: "log", Logs: &statsapi.FsStats{UsedBytes: u64(2 * mi)}})
		}
	})
	got := pass(t, m, node, 10*time.Second)
	if names := strings.Join(podNames(got), " "); names != "ns/over ns/side" {
		t.Fatalf("evicted %q, want every pod over a limit in one pass: ns/over ns/side", names)
	}
	checkLocalStorageKill(t, m, node, ev, "over", `Container c1 exceeded its local ephemeral storage limit "100Mi". `, "ephemeralcontainerfs.limit")
	checkLocalStorageKill(t, m, node, ev, "side", `Container log exceeded its local ephemeral storage limit "1Mi". `, "ephemeralcontainerfs.limit")
	if v := testutil.ToFloat64(m.metrics.evictions.WithLabelValues("ephemeralcontainerfs.limit")); v != 2 {
		t.Errorf("kubelet_evictions{ephemeralcontainerfs.limit} = %v, want 2", v)
	}
}

// With a dedicated image filesystem the writable layer is not the node's disk: only logs count.
func TestContainerLimitWithDedicatedImageFs(t *testing.T) {
	m, node, _, _ := newTestManager(t, isolated(nil))
	m.deps.DiskInfo = dedicated(true)
	p := storagePod("p", "100Mi")
	node.set(func(n *fakeNode) { n.pods, n.podFs["p"] = []*corev1.Pod{p}, containerUse(0, gi, 10*mi) })
	if got := pass(t, m, node, 10*time.Second); len(got) != 0 {
		t.Fatalf("evicted %v for its writable layer on a dedicated image filesystem", podNames(got))
	}
	node.set(func(n *fakeNode) { n.podFs["p"] = containerUse(0, 0, 101*mi) })
	if got := pass(t, m, node, 10*time.Second); len(got) != 1 {
		t.Fatal("not evicted for logs over its limit")
	}
}

// The emptyDir check comes first, then the pod's limit, then the containers': a pod over all three is
// evicted once, for its emptyDir.
func TestLocalStorageCheckOrder(t *testing.T) {
	m, node, ev, _ := newTestManager(t, isolated(nil))
	p := withEmptyDir(storagePod("p", "10Mi"), "scratch", "", "1Mi")
	node.set(func(n *fakeNode) {
		n.pods = []*corev1.Pod{p}
		n.podFs["p"] = func(s *statsapi.PodStats) {
			volumeUse("scratch", 2*mi)(s)
			containerUse(0, 20*mi, 0)(s)
			podUse(22 * mi)(s)
		}
	})
	if got := pass(t, m, node, 10*time.Second); len(got) != 1 || len(node.kills) != 1 {
		t.Fatalf("evicted %v, kills %d", podNames(got), len(node.kills))
	}
	checkLocalStorageKill(t, m, node, ev, "p", `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `, "emptydirfs.limit")
}

// Local storage limits are enforced before the thresholds: a pass that evicts for them evicts nothing for
// a met threshold; the next pass does.
func TestLocalStorageEvictionBeforeThresholds(t *testing.T) {
	m, node, _, _ := newTestManager(t, isolated(map[string]string{"memory.available": "500Mi"}))
	hog, writer := pod("hog", 0, ""), storagePod("writer", "10Mi")
	node.set(func(n *fakeNode) {
		n.pods, n.memAvail = []*corev1.Pod{hog, writer}, 100*mi
		n.podMemory = map[types.UID]int64{"hog": 2 * gi}
		n.podFs["writer"] = containerUse(0, 11*mi, 0)
	})
	if got := step(t, m, node, 10*time.Second); got == nil || got.Name != "writer" {
		t.Fatalf("first pass evicted %v, want writer (over its limit) before the memory threshold's hog", got)
	}
	if c := m.NodeConditions(); len(c) != 1 || c[0] != corev1.NodeMemoryPressure {
		t.Errorf("conditions %v: the threshold is still observed on that pass", c)
	}
	if got := step(t, m, node, 10*time.Second); got == nil || got.Name != "hog" {
		t.Fatalf("second pass evicted %v, want hog for memory.available", got)
	}
	if v := testutil.ToFloat64(m.metrics.evictions.WithLabelValues("memory.available")); v != 1 {
		t.Errorf("kubelet_evictions{memory.available} = %v", v)
	}
}

// localStorageCapacityIsolation: false: no limit is enforced; without thresholds the manager does not even
// read the stats.
func TestLocalStorageIsolationOff(t *testing.T) {
	for name, kc := range map[string]*kubeletconfigv1beta1.KubeletConfiguration{
		"no thresholds":   {LocalStorageCapacityIsolation: ptr.To(false)},
		"with thresholds": {LocalStorageCapacityIsolation: ptr.To(false), EvictionHard: map[string]string{"memory.available": "100Mi"}},
	} {
		t.Run(name, func(t *testing.T) {
			m, node, _, _ := newTestManager(t, kc)
			p := withEmptyDir(storagePod("p", "1Mi"), "scratch", "", "1Mi")
			node.set(func(n *fakeNode) {
				n.pods = []*corev1.Pod{p}
				n.podFs["p"] = func(s *statsapi.PodStats) { volumeUse("scratch", gi)(s); containerUse(0, gi, gi)(s); podUse(3 * gi)(s) }
			})
			if got := pass(t, m, node, 10*time.Second); len(got) != 0 {
				t.Fatalf("evicted %v with localStorageCapacityIsolation off", podNames(got))
			}
			if len(kc.EvictionHard) == 0 && node.summaries != 0 {
				t.Errorf("%d summaries read with nothing to enforce", node.summaries)
			}
		})
	}
}

// The pods' figures are read only when a pod has a local storage limit or a threshold acts: an idle node's
// passes read the node's alone.
func TestPodFiguresReadOnlyWhenNeeded(t *testing.T) {
	m, node, _, _ := newTestManager(t, isolated(map[string]string{"memory.available": "100Mi"}))
	node.set(func(n *fakeNode) { n.pods = []*corev1.Pod{storagePod("plain", "")} })
	if got := pass(t, m, node, 10*time.Second); len(got) != 0 {
		t.Fatalf("evicted %v", podNames(got))
	}
	if node.summaries != 0 || node.nodeSummaries != 1 {
		t.Fatalf("read %d full and %d node summaries with no limit and no pressure, want 0 and 1", node.summaries, node.nodeSummaries)
	}
	node.set(func(n *fakeNode) {
		n.pods = append(n.pods, withEmptyDir(storagePod("bounded", ""), "scratch", "", "1Mi"))
	})
	if got := pass(t, m, node, 10*time.Second); len(got) != 0 {
		t.Fatalf("evicted %v", podNames(got))
	}
	if node.summaries != 1 {
		t.Fatalf("read %d full summaries with an emptyDir sizeLimit to enforce, want 1", node.summaries)
	}
}

func TestCriticalPodsOverTheirLimitsAreNotEvicted(t *testing.T) {
	m, node, _, _ := newTestManager(t, isolated(nil))
	static := storagePod("static", "1Mi")
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	node.set(func(n *fakeNode) { n.pods, n.podFs["static"] = []*corev1.Pod{static}, containerUse(0, gi, 0) })
	if got := pass(t, m, node, 10*time.Second); len(got) != 0 || len(node.kills) != 0 {
		t.Fatalf("evicted static pod: %v", podNames(got))
	}
}
