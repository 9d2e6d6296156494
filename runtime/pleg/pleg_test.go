package pleg_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
	"github.com/nodelet/nodelet/runtime/pleg"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// plegWait bounds every wait for something asynchronous (CRI events, goroutines ending).
const plegWait = 10 * time.Second

const plegImage = "docker.io/library/busybox:latest"

// plegEnv is a fake runtime on a unix socket, the real client, and a fake clock.
type plegEnv struct {
	rt     *fake.Runtime
	client *runtime.Client
	clk    *clocktesting.FakeClock
}

func newPLEGEnv(t *testing.T) *plegEnv {
	t.Helper()
	dir, err := os.MkdirTemp("", "pleg") // short: unix socket paths are limited to ~108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	rt := fake.New(fake.WithClock(clk))
	rt.AddImage(plegImage, 1<<20)
	ep, err := rt.Start(filepath.Join(dir, "cri.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Stop)
	c, err := runtime.Dial(ep, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &plegEnv{rt: rt, client: c, clk: clk}
}

func (e *plegEnv) newPLEG(opts pleg.Options) *pleg.PLEG {
	opts.Clock = e.clk
	return pleg.New(e.client, opts)
}

func plegPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid")}}
}

func refOf(pod *corev1.Pod) pleg.PodRef {
	return pleg.PodRef{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
}

// runPod runs a labelled sandbox for pod with one started container per name.
func (e *plegEnv) runPod(t *testing.T, pod *corev1.Pod, containers ...string) (string, []string) {
	t.Helper()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)},
		Labels:   podconfig.SandboxLabels(pod),
	}
	var labels func(string) map[string]string
	if pod.UID != "" {
		labels = func(name string) map[string]string { return podconfig.ContainerLabels(pod, name) }
	} else {
		cfg.Labels, labels = nil, func(string) map[string]string { return nil }
	}
	return e.run(t, cfg, labels, containers)
}

func (e *plegEnv) run(t *testing.T, cfg *runtimeapi.PodSandboxConfig, labels func(string) map[string]string,
	containers []string) (string, []string) {
	t.Helper()
	ctx := context.Background()
	sb, err := e.client.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, name := range containers {
		id, err := e.client.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name},
			Image:    &runtimeapi.ImageSpec{Image: plegImage},
			Labels:   labels(name),
		}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.client.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return sb, ids
}

// relist runs one relist, which must succeed, and returns the events it emitted. Relist is synchronous, so
// everything it emitted is already in the channel.
func relist(t *testing.T, p *pleg.PLEG) []pleg.Event {
	t.Helper()
	if err := p.Relist(context.Background()); err != nil {
		t.Fatalf("Relist: %v", err)
	}
	return drain(p.Events())
}

func drain(ch <-chan pleg.Event) []pleg.Event {
	var out []pleg.Event
	for {
		select {
		case ev := <-ch:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// receive waits (bounded) for n events.
func receive(t *testing.T, ch <-chan pleg.Event, n int) []pleg.Event {
	t.Helper()
	var out []pleg.Event
	timeout := time.After(plegWait)
	for len(out) < n {
		select {
		case ev := <-ch:
			out = append(out, ev)
		case <-timeout:
			t.Fatalf("got %d events, want %d: %v", len(out), n, out)
		}
	}
	return out
}

// eventually polls cond (bounded) until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(plegWait)
	for !cond() {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func expectEvents(t *testing.T, got []pleg.Event, want ...pleg.Event) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n got  %v\n want %v", got, want)
	}
}

func ev(pod *corev1.Pod, typ pleg.EventType, id string) pleg.Event {
	return pleg.Event{Pod: refOf(pod), Type: typ, ContainerID: id}
}

func TestPLEGReportsOnlyPodsThatChanged(t *testing.T) {
	e := newPLEGEnv(t)
	p := e.newPLEG(pleg.Options{})
	web, db := plegPod("web"), plegPod("db")

	webSB, webCtrs := e.runPod(t, web, "app")
	expectEvents(t, relist(t, p), ev(web, pleg.ContainerStarted, webCtrs[0]), ev(web, pleg.SandboxChanged, webSB))

	dbSB, dbCtrs := e.runPod(t, db, "postgres", "backup")
	expectEvents(t, relist(t, p), ev(db, pleg.ContainerStarted, dbCtrs[0]),
		ev(db, pleg.ContainerStarted, dbCtrs[1]), ev(db, pleg.SandboxChanged, dbSB))

	expectEvents(t, relist(t, p))
	pods := p.Pods()
	if len(pods) != 2 || pods[0].PodRef != refOf(db) || pods[1].PodRef != refOf(web) ||
		len(pods[0].Containers) != 2 || len(pods[0].Sandboxes) != 1 || pods[0].Sandboxes[0].Id != dbSB {
		t.Fatalf("Pods() = %v", pods)
	}
	if refs := p.PodRefs(); len(refs) != 2 || refs[0] != refOf(db) || refs[1] != refOf(web) {
		t.Errorf("PodRefs() = %v, want db and web in UID order", refs)
	}
	if uids := p.PodUIDs(web.Namespace, web.Name); len(uids) != 1 || uids[0] != web.UID {
		t.Errorf("PodUIDs(web) = %v, want [%s]", uids, web.UID)
	}
	if uids := p.PodUIDs(web.Namespace, "gone"); len(uids) != 0 {
		t.Errorf("PodUIDs(gone) = %v, want none", uids)
	}
	for _, pod := range pods {
		for _, c := range pod.Containers {
			if c.Labels != nil || c.Annotations != nil {
				t.Errorf("container %s kept its labels or annotations: %v %v", c.Id, c.Labels, c.Annotations)
			}
		}
		for _, sb := range pod.Sandboxes {
			if sb.Labels != nil || sb.Annotations != nil {
				t.Errorf("sandbox %s kept its labels or annotations: %v %v", sb.Id, sb.Labels, sb.Annotations)
			}
		}
	}
}

func TestPLEGIgnoresObjectsWithoutPodLabels(t *testing.T) {
	e := newPLEGEnv(t)
	p := e.newPLEG(pleg.Options{})
	e.runPod(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: "other"}}, "sidecar")
	if len(e.rt.Containers()) != 1 {
		t.Fatal("the foreign container was not created")
	}
	expectEvents(t, relist(t, p))
	if pods := p.Pods(); len(pods) != 0 {
		t.Fatalf("Pods() = %v, want none", pods)
	}
	if refs := p.PodRefs(); len(refs) != 0 {
		t.Fatalf("PodRefs() = %v, want none", refs)
	}
}

func TestPLEGContainerLifecycle(t *testing.T) {
	e := newPLEGEnv(t)
	p := e.newPLEG(pleg.Options{})
	ctx := context.Background()
	web := plegPod("web")
	sb, ctrs := e.runPod(t, web, "app", "log")
	relist(t, p)

	if err := e.rt.ExitContainer(ctrs[0], 1, ""); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, relist(t, p), ev(web, pleg.ContainerDied, ctrs[0]))

	if err := e.client.RemoveContainer(ctx, ctrs[0]); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, relist(t, p), ev(web, pleg.ContainerRemoved, ctrs[0]))

	if err := e.client.StopPodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, relist(t, p), ev(web, pleg.ContainerDied, ctrs[1]), ev(web, pleg.SandboxChanged, sb))

	if err := e.client.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, relist(t, p), ev(web, pleg.ContainerRemoved, ctrs[1]), ev(web, pleg.SandboxChanged, sb))
	if pods := p.Pods(); len(pods) != 0 {
		t.Fatalf("Pods() = %v, want none", pods)
	}
	if refs := p.PodRefs(); len(refs) != 0 {
		t.Fatalf("PodRefs() = %v, want none", refs)
	}
}

func TestPLEGContainerRemovedWhileRunningDiesAndIsRemoved(t *testing.T) {
	e := newPLEGEnv(t)
	p := e.newPLEG(pleg.Options{})
	web := plegPod("web")
	_, ctrs := e.runPod(t, web, "app")
	relist(t, p)
	if err := e.client.RemoveContainer(context.Background(), ctrs[0]); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, relist(t, p), ev(web, pleg.ContainerDied, ctrs[0]), ev(web, pleg.ContainerRemoved, ctrs[0]))
}

func TestPLEGHealthFollowsSuccessfulRelists(t *testing.T) {
	e := newPLEGEnv(t)
	p := e.newPLEG(pleg.Options{})
	if err := p.Healthy(); err == nil {
		t.Fatal("healthy before any relist")
	}
	relist(t, p)
	if err := p.Healthy(); err != nil {
		t.Fatal(err)
	}

	e.rt.InjectError("ListContainers", status.Error(codes.Unavailable, "containerd restarting"))
	web := plegPod("web")
	sb, ctrs := e.runPod(t, web, "app")
	e.clk.Step(3*time.Minute + 5*time.Second)
	if err := p.Relist(context.Background()); err == nil {
		t.Fatal("Relist succeeded with ListContainers failing")
	}
	if got := drain(p.Events()); len(got) != 0 {
		t.Fatalf("failed relist emitted %v", got)
	}
	err := p.Healthy()
	if err == nil || err.Error() != "pleg was last seen active 3m5s ago; threshold is 3m0s" {
		t.Fatalf("Healthy() = %v", err)
	}

	e.rt.InjectError("ListContainers", nil)
	expectEvents(t, relist(t, p), ev(web, pleg.ContainerStarted, ctrs[0]), ev(web, pleg.SandboxChanged, sb))
	if err := p.Healthy(); err != nil {
		t.Fatal(err)
	}
}

func TestPLEGDropsAndCountsEventsWhenTheChannelIsFull(t *testing.T) {
	e := newPLEGEnv(t)
	reg := prometheus.NewRegistry()
	p := e.newPLEG(pleg.Options{EventBuffer: 1, Metrics: reg})
	events := p.Events()
	e.runPod(t, plegPod("web"), "app", "log")

	done := make(chan error, 1)
	go func() { done <- p.Relist(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(plegWait):
		t.Fatal("Relist blocked on a full event channel")
	}
	if got := drain(events); len(got) != 1 {
		t.Fatalf("got %v, want the one event that fit", got)
	}
	want := map[string]float64{
		"kubelet_pleg_discard_events":          2,
		"kubelet_pleg_last_seen_seconds":       float64(e.clk.Now().Unix()),
		"kubelet_pleg_relist_duration_seconds": 1, // sample count
	}
	for name, v := range want {
		if got := gathered(t, reg, name); got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}
}

// gathered returns the value of an unlabelled counter or gauge, or the sample count of a histogram.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		m := f.GetMetric()[0]
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

func TestPLEGSourceEnqueuesReconcileRequests(t *testing.T) {
	e := newPLEGEnv(t)
	p := e.newPLEG(pleg.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer queue.ShutDown()
	if err := p.Source().Start(ctx, queue); err != nil {
		t.Fatal(err)
	}

	e.runPod(t, plegPod("web"), "app", "log") // three events, one request
	e.runPod(t, plegPod("db"), "postgres")
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "two requests", func() bool { return queue.Len() == 2 })
	var names []string
	for range 2 {
		req, _ := queue.Get()
		if req.Namespace != "default" {
			t.Fatalf("request %v", req)
		}
		names = append(names, req.Name)
		queue.Done(req)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"db", "web"}) {
		t.Fatalf("requests for %v, want db and web", names)
	}
}

// startPLEG runs p.Start until the test ends, and waits for the first relist.
func startPLEG(t *testing.T, p *pleg.PLEG, log logr.Logger) {
	t.Helper()
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(plegWait):
			t.Error("Start did not return after its context ended")
		}
	})
	eventually(t, "the first relist", func() bool { return p.Healthy() == nil })
}

func TestPLEGFollowsCRIEvents(t *testing.T) {
	e := newPLEGEnv(t)
	reg := prometheus.NewRegistry()
	p := e.newPLEG(pleg.Options{UseEvents: true, Metrics: reg})
	events := p.Events()
	startPLEG(t, p, logr.Discard())
	eventually(t, "the event subscription", func() bool { return e.rt.EventSubscribers() == 1 })

	web := plegPod("web")
	sb, ctrs := e.runPod(t, web, "app") // the clock stands still: no relist, so these come from CRI events
	expectEvents(t, receive(t, events, 4), ev(web, pleg.SandboxChanged, sb), ev(web, pleg.SandboxChanged, sb),
		ev(web, pleg.ContainerChanged, ctrs[0]), ev(web, pleg.ContainerStarted, ctrs[0]))

	if err := e.rt.ExitContainer(ctrs[0], 0, ""); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, receive(t, events, 1), ev(web, pleg.ContainerDied, ctrs[0]))
	if err := e.client.RemoveContainer(context.Background(), ctrs[0]); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, receive(t, events, 1), ev(web, pleg.ContainerRemoved, ctrs[0]))
	if got := gathered(t, reg, "kubelet_evented_pleg_connection_success_count"); got != 1 {
		t.Errorf("kubelet_evented_pleg_connection_success_count = %v, want 1", got)
	}
}

func TestPLEGResubscribesToCRIEventsWithBackoff(t *testing.T) {
	e := newPLEGEnv(t)
	e.rt.InjectErrorOnce("GetContainerEvents", status.Error(codes.Unavailable, "containerd restarting"))
	reg := prometheus.NewRegistry()
	p := e.newPLEG(pleg.Options{UseEvents: true, Period: time.Hour, Metrics: reg})
	startPLEG(t, p, logr.Discard())
	eventually(t, "the failed subscription", func() bool { return slices.Contains(e.rt.Calls(), "GetContainerEvents") })
	if e.rt.EventSubscribers() != 0 {
		t.Fatal("subscribed despite the error")
	}
	eventually(t, "a new subscription after the back-off", func() bool {
		e.clk.Step(time.Second) // the back-off waits on the clock
		return e.rt.EventSubscribers() == 1
	})
	if got := gathered(t, reg, "kubelet_evented_pleg_connection_error_count"); got != 1 {
		t.Errorf("kubelet_evented_pleg_connection_error_count = %v, want 1", got)
	}
}

func TestPLEGRelistsOnlyWhenTheRuntimeHasNoEvents(t *testing.T) {
	e := newPLEGEnv(t)
	e.rt.InjectError("GetContainerEvents", status.Error(codes.Unimplemented, "not in containerd 1.7"))
	logs := &syncBuffer{}
	log := funcr.New(func(prefix, args string) { logs.write(prefix + args + "\n") }, funcr.Options{})
	p := e.newPLEG(pleg.Options{UseEvents: true})
	events := p.Events()
	startPLEG(t, p, log)
	eventually(t, "the log line", func() bool { return strings.Contains(logs.String(), "offers no container events") })

	web := plegPod("web")
	sb, ctrs := e.runPod(t, web, "app")
	e.clk.Step(time.Second) // the next relist tick
	expectEvents(t, receive(t, events, 2), ev(web, pleg.ContainerStarted, ctrs[0]), ev(web, pleg.SandboxChanged, sb))
	e.clk.Step(time.Minute)
	if n := count(e.rt.Calls(), "GetContainerEvents"); n != 1 {
		t.Fatalf("GetContainerEvents called %d times, want 1", n)
	}
}

func count(calls []string, method string) int {
	n := 0
	for _, c := range calls {
		if c == method {
			n++
		}
	}
	return n
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) write(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
