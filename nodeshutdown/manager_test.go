package nodeshutdown

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/podrules"
)

// fakeLogind is logind: its InhibitDelayMax follows an override, its locks are pipes, its signals come from
// the test.
type fakeLogind struct {
	mu        sync.Mutex
	delay     time.Duration
	overrides []time.Duration
	locks     []*os.File // the write ends of the locks' pipes: a write fails once the lock is released
	events    chan bool
}

func (f *fakeLogind) InhibitDelayMax() (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay, nil
}

func (f *fakeLogind) Inhibit() (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.locks = append(f.locks, w)
	return r, nil
}

func (f *fakeLogind) OverrideInhibitDelay(d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.overrides = append(f.overrides, d)
	f.delay = d
	return nil
}

func (f *fakeLogind) WatchShutdown() (<-chan bool, error) { return f.events, nil }
func (f *fakeLogind) Close() error                        { return nil }

// held counts the locks not released.
func (f *fakeLogind) held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, w := range f.locks {
		if _, err := w.Write([]byte{0}); err == nil {
			n++
		}
	}
	return n
}

type kill struct {
	name   string
	grace  int64
	reason string
	cond   corev1.PodCondition
}

// fakePods stop at once when killed.
type fakePods struct {
	mu    sync.Mutex
	pods  []*corev1.Pod
	kills []kill
	gone  map[types.UID]bool
}

func (f *fakePods) AdmittedPods() []*corev1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pods
}

func (f *fakePods) KillPod(pod *corev1.Pod, grace int64, reason, _ string, c *corev1.PodCondition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kills = append(f.kills, kill{name: pod.Name, grace: grace, reason: reason, cond: *c})
	f.gone[pod.UID] = true
}

func (f *fakePods) PodCleanedUp(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gone[uid]
}

func (f *fakePods) killed() []kill {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]kill(nil), f.kills...)
}

func pod(name string, priority int32, grace int64) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec: corev1.PodSpec{Priority: ptr.To(priority), TerminationGracePeriodSeconds: ptr.To(grace)}}
}

func TestGroupsFromTheKubeletConfiguration(t *testing.T) {
	g := NewWithT(t)
	kc := &kubeletconfigv1beta1.KubeletConfiguration{ShutdownGracePeriod: metav1.Duration{Duration: 30 * time.Second},
		ShutdownGracePeriodCriticalPods: metav1.Duration{Duration: 10 * time.Second}}
	g.Expect(Groups(kc)).To(Equal([]Group{{0, 20 * time.Second}, {podrules.SystemCriticalPriority, 10 * time.Second}}))
	g.Expect(Groups(&kubeletconfigv1beta1.KubeletConfiguration{})).To(BeEmpty())
	kc = &kubeletconfigv1beta1.KubeletConfiguration{ShutdownGracePeriodByPodPriority: []kubeletconfigv1beta1.ShutdownGracePeriodByPodPriority{
		{Priority: 100000, ShutdownGracePeriodSeconds: 30}, {Priority: 0, ShutdownGracePeriodSeconds: 10}}}
	g.Expect(Groups(kc)).To(Equal([]Group{{0, 10 * time.Second}, {100000, 30 * time.Second}}))
	groups := []Group{{0, time.Second}, {1000, time.Second}, {podrules.SystemCriticalPriority, time.Second}}
	got := groupPods(groups, []*corev1.Pod{pod("low", -5, 1), pod("mid", 1500, 1), pod("node-critical", 2000001000, 1), pod("zero", 0, 1)})
	names := func(ps []*corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	g.Expect(names(got[0])).To(Equal([]string{"low", "zero"}))
	g.Expect(names(got[1])).To(Equal([]string{"mid"}))
	g.Expect(names(got[2])).To(Equal([]string{"node-critical"}))
}

// A shutdown: logind's delay raised to the periods' sum, the lock held; on PrepareForShutdown the node is
// NotReady and refuses pods, the pods stop lowest priority first with the kubelet's grace periods and
// status, the lock goes and the state is recorded; a cancel takes the lock again.
func TestShutdownStopsPodsByPriorityAndCancels(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	l := &fakeLogind{delay: 5 * time.Second, events: make(chan bool)}
	pods := &fakePods{gone: map[types.UID]bool{}, pods: []*corev1.Pod{
		pod("critical", 2000001000, 120), pod("short", 0, 5), pod("long", 0, 120)}}
	rec := record.NewFakeRecorder(10)
	syncs := make(chan struct{}, 10)
	kc := &kubeletconfigv1beta1.KubeletConfiguration{ShutdownGracePeriod: metav1.Duration{Duration: 20 * time.Second},
		ShutdownGracePeriodCriticalPods: metav1.Duration{Duration: 10 * time.Second}}
	m := New(Options{Groups: Groups(kc), Pods: pods, Recorder: rec, NodeName: "n", Clock: clock.RealClock{}, Log: testr.New(t),
		SyncNode: func() { syncs <- struct{}{} }, StateDir: dir,
		connect: func(context.Context, string) (logind, error) { return l, nil }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Start(ctx) }()
	defer func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	}()

	g.Eventually(l.held).Should(Equal(1))
	g.Expect(l.overrides).To(Equal([]time.Duration{20 * time.Second}))
	g.Expect(m.ShutdownStatus()).To(Succeed())

	l.events <- true
	<-syncs
	g.Expect(m.ShutdownStatus()).To(MatchError("node is shutting down"))
	ok, reason, msg := m.Admit(pod("new", 0, 1))
	g.Expect([]any{ok, reason, msg}).To(Equal([]any{false, "NodeShutdown", "Pod was rejected as the node is shutting down."}))
	g.Eventually(l.held).Should(BeZero())
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet",
		Message: "Pod was terminated in response to imminent node shutdown."}
	g.Expect(pods.killed()).To(Equal([]kill{
		{name: "short", grace: 5, reason: "Terminated", cond: cond}, {name: "long", grace: 10, reason: "Terminated", cond: cond},
		{name: "critical", grace: 10, reason: "Terminated", cond: cond}}))
	st, err := loadState(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.StartTime.IsZero() || st.EndTime.Before(st.StartTime)).To(BeFalse(), "state %+v", st)
	g.Expect(<-rec.Events).To(Equal("Normal Shutdown Shutdown manager detected shutdown event"))

	l.events <- false
	<-syncs
	g.Expect(m.ShutdownStatus()).To(Succeed())
	g.Eventually(l.held).Should(Equal(1))
	g.Expect(<-rec.Events).To(Equal("Normal Shutdown Shutdown manager detected shutdown cancellation"))
	_, err = os.Stat(filepath.Join(dir, StateFile))
	g.Expect(err).NotTo(HaveOccurred())
}

// Off without periods: no logind, nothing refused.
func TestOffWithoutPeriods(t *testing.T) {
	m := New(Options{connect: func(context.Context, string) (logind, error) {
		t.Fatal("logind reached with graceful shutdown off")
		return nil, nil
	}})
	if m.Enabled() {
		t.Fatal("enabled without groups")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := m.Admit(pod("p", 0, 1)); !ok {
		t.Fatal("a pod refused")
	}
}

// A lost D-Bus connection is made again: the lock is taken on the new one, and its signals are followed.
func TestReconnectsAfterTheBusGoes(t *testing.T) {
	g := NewWithT(t)
	first := &fakeLogind{delay: time.Minute, events: make(chan bool)}
	second := &fakeLogind{delay: time.Minute, events: make(chan bool)}
	conns := make(chan logind, 2)
	conns <- first
	conns <- second
	syncs := make(chan struct{}, 10)
	m := New(Options{Groups: []Group{{0, time.Second}}, Recorder: record.NewFakeRecorder(10), Clock: clock.RealClock{}, Log: testr.New(t),
		SyncNode: func() { syncs <- struct{}{} }, StateDir: t.TempDir(),
		connect: func(context.Context, string) (logind, error) { return <-conns, nil }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Start(ctx) }()
	defer func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	}()
	g.Eventually(first.held).Should(Equal(1))
	close(first.events) // the connection is gone
	g.Eventually(second.held, 10*time.Second).Should(Equal(1), "a lock on the new connection after a second")
	g.Expect(first.held()).To(BeZero(), "the old lock released")
	second.events <- true
	<-syncs
	g.Expect(m.ShutdownStatus()).To(HaveOccurred())
}
