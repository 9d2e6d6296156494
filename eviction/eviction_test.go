package eviction

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const (
	mi = int64(1) << 20
	gi = int64(1) << 30
)

// fakeNode is the node's figures and pods as the manager sees them: a summary, the active pods and the
// kills asked for.
type fakeNode struct {
	mu         sync.Mutex
	clock      *clocktesting.FakeClock
	memAvail   int64 // bytes
	memWS      int64
	fsAvail    int64
	fsCapacity int64
	podMemory  map[types.UID]int64
	// podFs adds a pod's filesystem figures to its stats.
	podFs         map[types.UID]func(*statsapi.PodStats)
	summaries     int // pod summaries read
	nodeSummaries int // node-only summaries read
	pods          []*corev1.Pod
	kills         []kill
	reclaimed     int64 // bytes freed by each node-level reclaim
	reclaims      []string
}

type kill struct {
	pod             string
	grace           int64
	reason, message string
	condition       *corev1.PodCondition
}

func u64(v int64) *uint64 { x := uint64(v); return &x }

func (n *fakeNode) Summary(context.Context) (*statsapi.Summary, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := metav1.NewTime(n.clock.Now())
	sum := &statsapi.Summary{Node: statsapi.NodeStats{
		Memory: &statsapi.MemoryStats{Time: now, AvailableBytes: u64(n.memAvail), WorkingSetBytes: u64(n.memWS), UsageBytes: u64(n.memWS)},
		Fs:     &statsapi.FsStats{Time: now, AvailableBytes: u64(n.fsAvail), CapacityBytes: u64(n.fsCapacity), InodesFree: u64(1 << 20), Inodes: u64(2 << 20)},
	}}
	for _, p := range n.pods {
		ws := n.podMemory[p.UID]
		ps := statsapi.PodStats{PodRef: statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
			Memory: &statsapi.MemoryStats{Time: now, WorkingSetBytes: u64(ws)}}
		for _, c := range p.Spec.Containers {
			ps.Containers = append(ps.Containers, statsapi.ContainerStats{Name: c.Name,
				Memory: &statsapi.MemoryStats{Time: now, WorkingSetBytes: u64(ws)}})
		}
		if f := n.podFs[p.UID]; f != nil {
			f(&ps)
		}
		sum.Pods = append(sum.Pods, ps)
	}
	n.summaries++
	return sum, nil
}

func (n *fakeNode) NodeSummary(ctx context.Context) (*statsapi.Summary, error) {
	sum, err := n.Summary(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.summaries--
	n.nodeSummaries++
	sum.Pods = nil
	return sum, err
}

func (n *fakeNode) PodSummaries(ctx context.Context) ([]statsapi.PodStats, error) {
	sum, err := n.Summary(ctx)
	return sum.Pods, err
}

func (n *fakeNode) ActivePods() []*corev1.Pod {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*corev1.Pod(nil), n.pods...)
}

func (n *fakeNode) KillPod(pod *corev1.Pod, grace int64, reason, message string, cond *corev1.PodCondition) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.kills = append(n.kills, kill{pod.Name, grace, reason, message, cond})
	for i, p := range n.pods {
		if p.UID == pod.UID {
			n.pods = append(n.pods[:i], n.pods[i+1:]...)
			break
		}
	}
}

func (n *fakeNode) PodCleanedUp(types.UID) bool { return true }

func (n *fakeNode) DeleteUnusedImages(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reclaims = append(n.reclaims, "images")
	n.fsAvail += n.reclaimed
	return nil
}

func (n *fakeNode) DeleteAllUnusedContainers(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reclaims = append(n.reclaims, "containers")
	return nil
}

func (n *fakeNode) set(f func(*fakeNode)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(n)
}

type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) Eventf(_ apiruntime.Object, typ, reason, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, typ+" "+reason+" "+fmt.Sprintf(format, args...))
}

func (e *events) AnnotatedEventf(o apiruntime.Object, ann map[string]string, typ, reason, format string, args ...any) {
	e.Eventf(o, typ, reason, format+fmt.Sprintf(" %v", ann), args...)
}

func pod(name string, priority int32, memRequest string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec: corev1.PodSpec{Priority: &priority, Containers: []corev1.Container{{Name: "c"}}}}
	if memRequest != "" {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memRequest)}
	}
	return p
}

// newTestManager builds a manager on a fake node from kc; localStorageCapacityIsolation is off unless kc
// sets it.
func newTestManager(t *testing.T, kc *kubeletconfigv1beta1.KubeletConfiguration) (*Manager, *fakeNode, *events, *prometheus.Registry) {
	t.Helper()
	ts, err := Thresholds(kc)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	node := &fakeNode{clock: clk, memAvail: 4 * gi, memWS: 4 * gi, fsAvail: 50 * gi, fsCapacity: 100 * gi,
		podMemory: map[types.UID]int64{}, podFs: map[types.UID]func(*statsapi.PodStats){}}
	ev := &events{}
	reg := prometheus.NewRegistry()
	m, err := New(Options{NodeName: "node-a", Thresholds: ts, PressureTransitionPeriod: 5 * time.Minute,
		MaxPodGracePeriodSeconds:      int64(kc.EvictionMaxPodGracePeriod),
		LocalStorageCapacityIsolation: ptr.Deref(kc.LocalStorageCapacityIsolation, false)},
		Deps{Stats: node, Pods: node, ImageGC: node, ContainerGC: node, Recorder: ev, Clock: clk, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	return m, node, ev, reg
}

// pass moves the clock and runs one pass; it returns the pods evicted.
func pass(t *testing.T, m *Manager, node *fakeNode, d time.Duration) []*corev1.Pod {
	t.Helper()
	node.clock.Step(d)
	ps, err := m.synchronize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// step is a pass that evicts one pod at most, returned.
func step(t *testing.T, m *Manager, node *fakeNode, d time.Duration) *corev1.Pod {
	t.Helper()
	switch ps := pass(t, m, node, d); len(ps) {
	case 0:
		return nil
	case 1:
		return ps[0]
	default:
		t.Fatalf("one pass evicted %d pods", len(ps))
		return nil
	}
}

func TestHardMemoryThresholdEvictsTheRankedPodAtOnce(t *testing.T) {
	m, node, ev, reg := newTestManager(t, &kubeletconfigv1beta1.KubeletConfiguration{
		EvictionHard: map[string]string{"memory.available": "500Mi"}})
	guaranteed, burstable, bestEffort := pod("guaranteed", 0, "600Mi"), pod("burstable", 0, "100Mi"), pod("besteffort", 0, "")
	node.set(func(n *fakeNode) {
		n.pods = []*corev1.Pod{guaranteed, burstable, bestEffort}
		n.podMemory = map[types.UID]int64{"guaranteed": 500 * mi, "burstable": 300 * mi, "besteffort": 200 * mi}
	})
	if p := step(t, m, node, 10*time.Second); p != nil || len(m.NodeConditions()) != 0 {
		t.Fatalf("healthy node: evicted %v, conditions %v", p, m.NodeConditions())
	}
	node.set(func(n *fakeNode) { n.memAvail = 400 * mi })
	p := step(t, m, node, 10*time.Second)
	if p == nil || p.Name != "burstable" {
		// burstable and besteffort exceed their requests; same priority; burstable uses 200Mi above its
		// request, besteffort 200Mi above none: the stable order keeps burstable first.
		t.Fatalf("evicted %v, want burstable", p)
	}
	if got := m.NodeConditions(); len(got) != 1 || got[0] != corev1.NodeMemoryPressure {
		t.Errorf("conditions %v, want [MemoryPressure]", got)
	}
	k := node.kills[0]
	wantMsg := "The node was low on resource: memory. Threshold quantity: 500Mi, available: 400Mi. Container c was using 300Mi, request is 100Mi, has larger consumption of memory. "
	if k.grace != 1 || k.reason != "Evicted" || k.message != wantMsg {
		t.Errorf("kill = %+v\nwant grace 1, Evicted, %q", k, wantMsg)
	}
	if c := k.condition; c == nil || c.Type != corev1.DisruptionTarget || c.Reason != "TerminationByKubelet" || c.Message != wantMsg {
		t.Errorf("condition = %+v", c)
	}
	joined := strings.Join(ev.list, "\n")
	for _, want := range []string{"Warning EvictionThresholdMet Attempting to reclaim memory", "Warning Evicted " + wantMsg} {
		if !strings.Contains(joined, want) {
			t.Errorf("events %q lack %q", joined, want)
		}
	}
	if v := testutil.ToFloat64(m.metrics.evictions.WithLabelValues("memory.available")); v != 1 {
		t.Errorf("kubelet_evictions = %v", v)
	}
	if n, _ := testutil.GatherAndCount(reg, "kubelet_evictions", "kubelet_eviction_stats_age_seconds"); n != 2 {
		t.Errorf("metrics gathered: %d series", n)
	}
	// The next pass ranks the remaining pods: besteffort (over its request) before guaranteed (under).
	if p := step(t, m, node, 10*time.Second); p == nil || p.Name != "besteffort" {
		t.Fatalf("second eviction %v, want besteffort", p)
	}
}

func TestRankMemory(t *testing.T) {
	low, high := pod("low", 0, "1Gi"), pod("high", 1000, "")
	hog, small, nostats := pod("hog", 1000, ""), pod("small", 1000, ""), pod("nostats", 1000, "")
	usage := map[types.UID]int64{"low": 900 * mi, "high": 10 * mi, "hog": 800 * mi, "small": 20 * mi}
	stats := func(uid types.UID) (statsapi.PodStats, bool) {
		v, ok := usage[uid]
		return statsapi.PodStats{Memory: &statsapi.MemoryStats{WorkingSetBytes: u64(v)}}, ok
	}
	pods := []*corev1.Pod{low, small, high, hog, nostats}
	rankMemory(pods, stats)
	var got []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	// No stats first; then those above their requests (priority 1000: hog before small before high, by usage);
	// low (under its request) last despite its lower priority.
	if want := "nostats hog small high low"; strings.Join(got, " ") != want {
		t.Errorf("rank = %v, want %s", got, want)
	}
}

func TestSoftThresholdWaitsForItsGracePeriod(t *testing.T) {
	m, node, _, _ := newTestManager(t, &kubeletconfigv1beta1.KubeletConfiguration{
		EvictionSoft:              map[string]string{"memory.available": "1Gi"},
		EvictionSoftGracePeriod:   map[string]string{"memory.available": "30s"},
		EvictionMaxPodGracePeriod: 20,
	})
	long := int64(60)
	p := pod("p", 0, "")
	p.Spec.TerminationGracePeriodSeconds = &long
	node.set(func(n *fakeNode) {
		n.pods, n.podMemory, n.memAvail = []*corev1.Pod{p}, map[types.UID]int64{"p": gi}, 900*mi
	})
	if got := step(t, m, node, 10*time.Second); got != nil {
		t.Fatal("evicted before the grace period")
	}
	if len(m.NodeConditions()) != 1 {
		t.Errorf("the condition is reported while the grace period runs: %v", m.NodeConditions())
	}
	step(t, m, node, 20*time.Second) // 20 s met
	if len(node.kills) != 0 {
		t.Fatal("evicted after 20 s of a 30 s grace period")
	}
	if got := step(t, m, node, 10*time.Second); got == nil || node.kills[0].grace != 20 {
		t.Fatalf("after 30 s: evicted %v, kills %+v (want grace evictionMaxPodGracePeriod 20)", got, node.kills)
	}
}

func TestTransitionPeriodAndMinimumReclaim(t *testing.T) {
	m, node, _, _ := newTestManager(t, &kubeletconfigv1beta1.KubeletConfiguration{
		EvictionHard:           map[string]string{"memory.available": "500Mi"},
		EvictionMinimumReclaim: map[string]string{"memory.available": "200Mi"},
	})
	node.set(func(n *fakeNode) { n.memAvail = 400 * mi })
	step(t, m, node, 10*time.Second) // no pods: nothing evicted, the threshold is met
	node.set(func(n *fakeNode) { n.memAvail = 600 * mi })
	step(t, m, node, 10*time.Second)
	m.mu.RLock()
	stillMet := len(m.thresholdsMet)
	m.mu.RUnlock()
	if stillMet != 1 {
		t.Errorf("600Mi available is above the threshold but not its minimum reclaim (700Mi): thresholds met %d, want 1", stillMet)
	}
	node.set(func(n *fakeNode) { n.memAvail = 800 * mi })
	step(t, m, node, 10*time.Second)
	m.mu.RLock()
	stillMet = len(m.thresholdsMet)
	m.mu.RUnlock()
	if stillMet != 0 {
		t.Errorf("800Mi available: thresholds met %d, want 0", stillMet)
	}
	if len(m.NodeConditions()) != 1 {
		t.Errorf("MemoryPressure must be held for the transition period: %v", m.NodeConditions())
	}
	step(t, m, node, 4*time.Minute+50*time.Second) // 5 min after the last pass that met it (at 20 s)
	if c := m.NodeConditions(); len(c) != 0 {
		t.Errorf("conditions after the transition period: %v", c)
	}
}

func TestDiskPressureReclaimsNodeLevelFirst(t *testing.T) {
	m, node, _, _ := newTestManager(t, &kubeletconfigv1beta1.KubeletConfiguration{
		EvictionHard: map[string]string{"nodefs.available": "10%"}})
	p := pod("p", 0, "")
	node.set(func(n *fakeNode) { n.pods, n.fsAvail, n.reclaimed = []*corev1.Pod{p}, 5*gi, 10*gi })
	if got := step(t, m, node, 10*time.Second); got != nil {
		t.Fatalf("evicted %s although reclaiming images freed enough", got.Name)
	}
	if strings.Join(node.reclaims, ",") != "containers,images" {
		t.Errorf("reclaims %v, want containers then images", node.reclaims)
	}
	if c := m.NodeConditions(); len(c) != 1 || c[0] != corev1.NodeDiskPressure {
		t.Errorf("conditions %v", c)
	}
	node.set(func(n *fakeNode) { n.fsAvail, n.reclaimed = 5*gi, 0 })
	if got := step(t, m, node, 10*time.Second); got == nil {
		t.Fatal("nothing evicted when reclaim freed nothing")
	}
}

func TestCriticalPodsAreNeverEvicted(t *testing.T) {
	m, node, _, _ := newTestManager(t, &kubeletconfigv1beta1.KubeletConfiguration{
		EvictionHard: map[string]string{"memory.available": "500Mi"}})
	critical := pod("critical", 2000001000, "")
	static := pod("static", 0, "")
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	node.set(func(n *fakeNode) {
		n.pods, n.memAvail = []*corev1.Pod{critical, static}, 100*mi
		n.podMemory = map[types.UID]int64{"critical": gi, "static": gi}
	})
	if got := step(t, m, node, 10*time.Second); got != nil {
		t.Fatalf("evicted critical pod %s", got.Name)
	}
}

func TestStaleStatsDoNotEvictAgain(t *testing.T) {
	m, node, _, _ := newTestManager(t, &kubeletconfigv1beta1.KubeletConfiguration{
		EvictionHard: map[string]string{"memory.available": "500Mi"}})
	node.set(func(n *fakeNode) {
		n.pods, n.memAvail = []*corev1.Pod{pod("a", 0, ""), pod("b", 0, "")}, 100*mi
	})
	if step(t, m, node, 10*time.Second) == nil {
		t.Fatal("no eviction")
	}
	if got := step(t, m, node, 0); got != nil {
		t.Errorf("evicted %s on the same figures as the last eviction", got.Name)
	}
}

func TestAdmit(t *testing.T) {
	m, _, _, _ := newTestManager(t, &kubeletconfigv1beta1.KubeletConfiguration{})
	bestEffort, burstable := pod("be", 0, ""), pod("bu", 0, "1Mi")
	tolerant := pod("tolerant", 0, "")
	tolerant.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	critical := pod("critical", 2000000000, "")
	for _, tc := range []struct {
		conditions []corev1.NodeConditionType
		pod        *corev1.Pod
		admit      bool
	}{
		{nil, bestEffort, true},
		{[]corev1.NodeConditionType{corev1.NodeMemoryPressure}, bestEffort, false},
		{[]corev1.NodeConditionType{corev1.NodeMemoryPressure}, burstable, true},
		{[]corev1.NodeConditionType{corev1.NodeMemoryPressure}, tolerant, true},
		{[]corev1.NodeConditionType{corev1.NodeDiskPressure}, burstable, false},
		{[]corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure}, tolerant, false},
		{[]corev1.NodeConditionType{corev1.NodeDiskPressure}, critical, true},
	} {
		m.mu.Lock()
		m.conditions = tc.conditions
		m.mu.Unlock()
		ok, reason, msg := m.Admit(tc.pod)
		if ok != tc.admit {
			t.Errorf("%v, pod %s: admit %v, want %v", tc.conditions, tc.pod.Name, ok, tc.admit)
		}
		if !ok && (reason != "Evicted" || msg != fmt.Sprintf("The node had condition: %v. ", tc.conditions)) {
			t.Errorf("rejection %q %q", reason, msg)
		}
	}
}

func TestThresholds(t *testing.T) {
	ts, err := Thresholds(&kubeletconfigv1beta1.KubeletConfiguration{
		EvictionHard:            map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
		EvictionSoft:            map[string]string{"memory.available": "300Mi"},
		EvictionSoftGracePeriod: map[string]string{"memory.available": "1m30s"},
		EvictionMinimumReclaim:  map[string]string{"memory.available": "0.5Gi", "nodefs.available": "5%"},
		EnforceNodeAllocatable:  []string{"pods"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range ts {
		mr := "-"
		if x.MinReclaim != nil {
			mr = formatValue(*x.MinReclaim)
		}
		got = append(got, fmt.Sprintf("%s hard=%v %s grace=%s minReclaim=%s", x.Signal, x.Hard, formatValue(x.Value), x.GracePeriod, mr))
	}
	want := []string{
		"memory.available hard=true 100Mi grace=0s minReclaim=512Mi",
		"nodefs.available hard=true 10% grace=0s minReclaim=5%",
		"memory.available hard=false 300Mi grace=1m30s minReclaim=512Mi",
		"allocatableMemory.available hard=true 100Mi grace=0s minReclaim=512Mi",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("thresholds:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for name, kc := range map[string]*kubeletconfigv1beta1.KubeletConfiguration{
		"soft without grace":   {EvictionSoft: map[string]string{"memory.available": "1Gi"}},
		"negative min reclaim": {EvictionMinimumReclaim: map[string]string{"memory.available": "-1"}},
		"unknown signal":       {EvictionMinimumReclaim: map[string]string{"cpu.available": "1"}},
		"zero percent reclaim": {EvictionMinimumReclaim: map[string]string{"memory.available": "0%"}},
	} {
		if _, err := Thresholds(kc); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

type dedicated bool

func (d dedicated) HasDedicatedImageFs(context.Context) (bool, error) { return bool(d), nil }

// With a dedicated image filesystem, nodefs pressure has nothing to reclaim at node level (the kubelet's
// table): pods are evicted at once, ranked by logs and local volumes.
func TestNodefsPressureWithADedicatedImageFs(t *testing.T) {
	m, node, _, _ := newTestManager(t, &kubeletconfigv1beta1.KubeletConfiguration{
		EvictionHard: map[string]string{"nodefs.available": "10%"}})
	m.deps.DiskInfo = dedicated(true)
	node.set(func(n *fakeNode) { n.pods, n.fsAvail, n.reclaimed = []*corev1.Pod{pod("p", 0, "")}, 5*gi, 10*gi })
	if got := step(t, m, node, 10*time.Second); got == nil {
		t.Fatal("nothing evicted")
	}
	if len(node.reclaims) != 0 {
		t.Errorf("node-level reclaim %v for nodefs with a dedicated image filesystem", node.reclaims)
	}
}

// Disk ranking counts writable layers, logs and local volumes (an emptyDir on disk, not one in memory).
func TestRankDiskCountsLocalVolumes(t *testing.T) {
	withDir := func(name string, medium corev1.StorageMedium) *corev1.Pod {
		p := pod(name, 0, "")
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium}}}}
		return p
	}
	disk, mem, plain := withDir("disk", ""), withDir("mem", corev1.StorageMediumMemory), pod("plain", 0, "")
	stats := func(uid types.UID) (statsapi.PodStats, bool) {
		big, small := u64(5*gi), u64(mi)
		s := statsapi.PodStats{Containers: []statsapi.ContainerStats{{Name: "c", Rootfs: &statsapi.FsStats{UsedBytes: small}}},
			VolumeStats: []statsapi.VolumeStats{{Name: "scratch", FsStats: statsapi.FsStats{UsedBytes: big}}}}
		if uid == "plain" {
			s.Containers[0].Rootfs.UsedBytes = u64(2 * gi)
			s.VolumeStats = nil
		}
		return s, true
	}
	pods := []*corev1.Pod{mem, plain, disk}
	rankFor("nodefs.available", false)(pods, stats)
	if pods[0].Name != "disk" || pods[1].Name != "plain" || pods[2].Name != "mem" {
		t.Errorf("rank %s %s %s, want disk plain mem", pods[0].Name, pods[1].Name, pods[2].Name)
	}
}
