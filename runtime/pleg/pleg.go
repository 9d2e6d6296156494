package pleg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nodelet/nodelet/internal/periodic"
	"github.com/nodelet/nodelet/runtime"
)

// PLEG defaults, as in the kubelet.
const (
	DefaultPeriod         = time.Second
	DefaultStallThreshold = 3 * time.Minute
	DefaultEventBuffer    = 1000
)

// PodRef names a pod the runtime holds something for.
type PodRef struct {
	UID             types.UID
	Name, Namespace string
}

// String returns "namespace/name".
func (r PodRef) String() string { return r.Namespace + "/" + r.Name }

// EventType is what changed in a pod; the values are the kubelet's PodLifecycleEventType names.
type EventType string

// Event types.
const (
	// ContainerStarted: a container is now running.
	ContainerStarted EventType = "ContainerStarted"
	// ContainerDied: a container exited (or vanished while it was not known to have exited).
	ContainerDied EventType = "ContainerDied"
	// ContainerRemoved: a container is gone from the runtime.
	ContainerRemoved EventType = "ContainerRemoved"
	// ContainerChanged: a container moved to a state the PLEG does not name (created, unknown).
	ContainerChanged EventType = "ContainerChanged"
	// SandboxChanged: a sandbox appeared, changed state or was removed. It carries the kubelet's name for
	// "the pod needs a full sync".
	SandboxChanged EventType = "PodSync"
)

// Event says that something of a pod changed in the runtime. ContainerID is the container's ID, or the
// sandbox's for SandboxChanged.
type Event struct {
	Pod         PodRef
	Type        EventType
	ContainerID string
}

// RelistedPod is what one relist saw of a pod. The protos are shared: do not modify them. They carry no
// labels or annotations: what the PLEG read of those is in PodRef, and the relist is kept until the next
// one, so it keeps only what tells one state from the next.
type RelistedPod struct {
	PodRef
	Sandboxes  []*runtimeapi.PodSandbox
	Containers []*runtimeapi.Container
}

// relister is what the PLEG needs of the runtime; *runtime.Client satisfies it.
type relister interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	GetContainerEvents(ctx context.Context) (runtimeapi.RuntimeService_GetContainerEventsClient, error)
}

// Options configure a PLEG. Zero values take the defaults.
type Options struct {
	// Period between relists (default 1s).
	Period time.Duration
	// StallThreshold: Healthy fails when the last successful relist is older (default 3m).
	StallThreshold time.Duration
	// Clock drives relisting, health and back-off (default the real clock).
	Clock clock.WithTicker
	// Metrics registers the kubelet's PLEG metrics; nil registers none.
	Metrics prometheus.Registerer
	// UseEvents subscribes to the runtime's container events when it offers them; relisting continues as
	// the fallback.
	UseEvents bool
	// EventBuffer is the capacity of the event channels (default 1000). Events that do not fit are dropped
	// and counted, never waited for.
	EventBuffer int
	// OnContainerDied, when set, is told of every ContainerDied event (the kubelet's pod container
	// deletor); it must not block.
	OnContainerDied func(Event)
}

func (o Options) withDefaults() Options {
	if o.Period <= 0 {
		o.Period = DefaultPeriod
	}
	if o.StallThreshold <= 0 {
		o.StallThreshold = DefaultStallThreshold
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.EventBuffer <= 0 {
		o.EventBuffer = DefaultEventBuffer
	}
	return o
}

// PLEG is the pod lifecycle event generator: it relists the runtime's sandboxes and containers, diffs each
// relist against the previous one, and reports which pods changed. Events are hints for when to look; the
// reconciler reads the runtime's state itself.
//
// Events reach one consumer, through Events or Source: both read the same channel, so when both are used
// (or Source is started twice) each event goes to only one of them.
type PLEG struct {
	runtime relister
	opts    Options
	metrics *plegMetrics
	started atomic.Bool

	relistMu sync.Mutex                    // serialises Relist
	records  map[types.UID]*RelistedPod    // the previous relist; guarded by relistMu
	state    atomic.Pointer[relistedState] // the last successful relist, for Healthy and Pods

	events chan Event
	cache  *PodCache
}

// relistedState is what the last successful relist left for readers.
type relistedState struct {
	at   time.Time
	pods []RelistedPod
}

// New returns a PLEG relisting r. It does nothing until Start (or Relist) is called.
func New(r relister, opts Options) *PLEG {
	opts = opts.withDefaults()
	return &PLEG{
		runtime: r,
		opts:    opts,
		metrics: newPLEGMetrics(opts.Metrics),
		records: map[types.UID]*RelistedPod{},
		events:  make(chan Event, opts.EventBuffer),
		cache:   NewPodCache(),
	}
}

// Cache returns the pods' runtime state that this PLEG keeps current: every relist and container event
// invalidates the entries the runtime disagrees with, before the events that wake their workers.
func (p *PLEG) Cache() *PodCache { return p.cache }

// Events returns the channel of events. Events that do not fit in its buffer are dropped and counted.
func (p *PLEG) Events() <-chan Event { return p.events }

// Start relists every Period (at once first), and follows the runtime's container events when UseEvents is
// set, until ctx ends. It blocks: it is a manager Runnable.
func (p *PLEG) Start(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("pleg already started")
	}
	var wg sync.WaitGroup
	if p.opts.UseEvents {
		wg.Go(func() { p.watchEvents(ctx) })
	}
	p.relistLoop(ctx)
	wg.Wait()
	return nil
}

// NeedLeaderElection returns false: every node runs its own PLEG.
func (p *PLEG) NeedLeaderElection() bool { return false }

func (p *PLEG) relistLoop(ctx context.Context) {
	_ = periodic.Run(ctx, p.opts.Clock, nil, p.opts.Period, periodic.Measured(ctx, "pleg-relist", p.relistOnce))
}

// relistOnce relists and logs a failure, unless ctx ended.
func (p *PLEG) relistOnce(ctx context.Context) {
	if err := p.Relist(ctx); err != nil && ctx.Err() == nil {
		logr.FromContextOrDiscard(ctx).Error(err, "PLEG relist failed")
	}
}

// Healthy returns an error when no relist has succeeded yet or the last one is older than StallThreshold.
func (p *PLEG) Healthy() error {
	st := p.state.Load()
	if st == nil {
		return errors.New("pleg has yet to be successful")
	}
	if elapsed := p.opts.Clock.Since(st.at); elapsed > p.opts.StallThreshold {
		return fmt.Errorf("pleg was last seen active %v ago; threshold is %v", elapsed, p.opts.StallThreshold)
	}
	return nil
}

// Pods returns the pods seen by the last successful relist, ordered by UID.
func (p *PLEG) Pods() []RelistedPod {
	st := p.state.Load()
	if st == nil {
		return nil
	}
	out := make([]RelistedPod, len(st.pods))
	for i, pod := range st.pods {
		out[i] = RelistedPod{PodRef: pod.PodRef,
			Sandboxes: slices.Clone(pod.Sandboxes), Containers: slices.Clone(pod.Containers)}
	}
	return out
}

// PodRefs returns the pods the last successful relist saw, ordered by UID, without their containers and
// sandboxes.
func (p *PLEG) PodRefs() []PodRef {
	st := p.state.Load()
	if st == nil {
		return nil
	}
	out := make([]PodRef, len(st.pods))
	for i, pod := range st.pods {
		out[i] = pod.PodRef
	}
	return out
}

// PodUIDs returns the UIDs of the pods with this namespace and name that the last successful relist saw
// (more than one while a deleted pod's successor starts), without copying the relist.
func (p *PLEG) PodUIDs(namespace, name string) []types.UID {
	st := p.state.Load()
	if st == nil {
		return nil
	}
	var out []types.UID
	for _, pod := range st.pods {
		if pod.Namespace == namespace && pod.Name == name {
			out = append(out, pod.UID)
		}
	}
	return out
}

// Relist lists sandboxes and containers once, diffs them against the previous relist and emits an event per
// change, for the pods that changed. When listing fails it emits nothing and the health timestamp stays.
func (p *PLEG) Relist(ctx context.Context) error {
	p.relistMu.Lock()
	defer p.relistMu.Unlock()
	start := p.opts.Clock.Now()
	if st := p.state.Load(); st != nil {
		p.metrics.interval.Observe(start.Sub(st.at).Seconds())
	}
	defer func() { p.metrics.duration.Observe(p.opts.Clock.Since(start).Seconds()) }()

	current, err := p.list(ctx)
	if err != nil {
		return fmt.Errorf("pleg relist: %w", err)
	}
	events := diffPods(p.records, current)
	p.records = current
	p.cache.reconcile(current)
	p.state.Store(&relistedState{at: start, pods: sortedPods(current)})
	p.metrics.lastSeen.Set(float64(start.Unix()))
	p.emitAll(ctx, events)
	return nil
}

// list returns the runtime's sandboxes and containers that carry a pod UID label, by pod.
func (p *PLEG) list(ctx context.Context) (map[types.UID]*RelistedPod, error) {
	sandboxes, err := p.runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, err
	}
	containers, err := p.runtime.ListContainers(ctx, nil)
	if err != nil {
		return nil, err
	}
	pods := map[types.UID]*RelistedPod{}
	for _, s := range sandboxes {
		if pod := podFor(pods, s.Labels); pod != nil {
			s.Labels, s.Annotations = nil, nil
			pod.Sandboxes = append(pod.Sandboxes, s)
		}
	}
	for _, c := range containers {
		if pod := podFor(pods, c.Labels); pod != nil {
			c.Labels, c.Annotations = nil, nil
			pod.Containers = append(pod.Containers, c)
		}
	}
	return pods, nil
}

// podFor returns the entry of the pod named by labels, creating it; nil when labels carry no pod UID.
func podFor(pods map[types.UID]*RelistedPod, labels map[string]string) *RelistedPod {
	ref, ok := podRefOf(labels)
	if !ok {
		return nil
	}
	pod := pods[ref.UID]
	if pod == nil {
		pod = &RelistedPod{PodRef: ref}
		pods[ref.UID] = pod
	}
	return pod
}

// podRefOf reads the kubelet's pod labels; ok is false when there is no pod UID (not a pod of ours).
func podRefOf(labels map[string]string) (PodRef, bool) {
	uid := runtime.PodUIDOf(labels)
	if uid == "" {
		return PodRef{}, false
	}
	return PodRef{UID: uid, Name: labels[runtime.LabelPodName], Namespace: labels[runtime.LabelPodNamespace]}, true
}

func sortedPods(pods map[types.UID]*RelistedPod) []RelistedPod {
	out := make([]RelistedPod, 0, len(pods))
	for _, pod := range pods {
		out = append(out, *pod)
	}
	slices.SortFunc(out, func(a, b RelistedPod) int { return strings.Compare(string(a.UID), string(b.UID)) })
	return out
}

// Source returns a controller-runtime source that, once started, takes the events off the Events channel and
// enqueues a reconcile.Request{Namespace, Name} for each (events of pods without a name label are skipped).
func (p *PLEG) Source() source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go p.enqueue(ctx, q)
		return nil
	})
}

// enqueue turns events into reconcile requests until ctx ends.
func (p *PLEG) enqueue(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-p.events:
			if ev.Pod.Name != "" {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ev.Pod.Namespace, Name: ev.Pod.Name}})
			}
		}
	}
}

// emitAll offers events to the channel without waiting, and logs once how many did not fit.
func (p *PLEG) emitAll(ctx context.Context, events []Event) {
	log := logr.FromContextOrDiscard(ctx)
	dropped := 0
	for _, ev := range events {
		log.V(1).Info("PLEG event", "pod", ev.Pod.String(), "podUID", ev.Pod.UID, "event", ev.Type,
			"containerID", ev.ContainerID)
		if ev.Type == ContainerDied && p.opts.OnContainerDied != nil {
			p.opts.OnContainerDied(ev)
		}
		select {
		case p.events <- ev:
		default:
			dropped++
		}
	}
	if dropped > 0 {
		p.metrics.discard.Add(float64(dropped))
		log.Error(nil, "PLEG event channel full, events dropped", "dropped", dropped)
	}
}

// plegState is a container's state as the kubelet's generic PLEG sees it; "" is "does not exist".
type plegState string

const (
	plegRunning plegState = "running"
	plegExited  plegState = "exited"
	plegUnknown plegState = "unknown" // created, or unknown to the runtime
	plegGone    plegState = ""
)

func plegStateOf(s runtimeapi.ContainerState) plegState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return plegRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return plegExited
	default:
		return plegUnknown
	}
}

// idStates maps container or sandbox IDs to their states ("" for absent) in listing order.
type idStates struct {
	order []string
	state map[string]string
}

func (s *idStates) add(id, st string) {
	s.order = append(s.order, id)
	s.state[id] = st
}

func containerStates(pod *RelistedPod) idStates {
	s := idStates{state: map[string]string{}}
	if pod != nil {
		for _, c := range pod.Containers {
			s.add(c.Id, string(plegStateOf(c.State)))
		}
	}
	return s
}

func sandboxStates(pod *RelistedPod) idStates {
	s := idStates{state: map[string]string{}}
	if pod != nil {
		for _, sb := range pod.Sandboxes {
			s.add(sb.Id, sb.State.String())
		}
	}
	return s
}

// unionIDs lists the IDs of cur in order, then those only in old.
func unionIDs(old, cur idStates) []string {
	ids := slices.Clone(cur.order)
	for _, id := range old.order {
		if _, ok := cur.state[id]; !ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// diffPods returns the events between two relists, pod by pod in UID order.
func diffPods(old, cur map[types.UID]*RelistedPod) []Event {
	uids := make([]types.UID, 0, len(cur)+len(old))
	for uid := range cur {
		uids = append(uids, uid)
	}
	for uid := range old {
		if _, ok := cur[uid]; !ok {
			uids = append(uids, uid)
		}
	}
	slices.Sort(uids)
	var events []Event
	for _, uid := range uids {
		events = append(events, podEvents(old[uid], cur[uid])...)
	}
	return events
}

// podEvents returns the events of one pod: its containers' transitions, then its sandboxes' changes.
func podEvents(old, cur *RelistedPod) []Event {
	if unchanged(old, cur) {
		return nil
	}
	ref := cur
	if ref == nil {
		ref = old
	}
	var events []Event
	oldC, curC := containerStates(old), containerStates(cur)
	for _, id := range unionIDs(oldC, curC) {
		events = append(events, containerEvents(ref.PodRef, id, plegState(oldC.state[id]), plegState(curC.state[id]))...)
	}
	oldS, curS := sandboxStates(old), sandboxStates(cur)
	for _, id := range unionIDs(oldS, curS) {
		if oldS.state[id] != curS.state[id] {
			events = append(events, Event{Pod: ref.PodRef, Type: SandboxChanged, ContainerID: id})
		}
	}
	return events
}

// unchanged reports whether both relists saw the same containers and sandboxes of a pod, in the same order and
// states: a pod without events, the common case, told without building the state maps.
func unchanged(old, cur *RelistedPod) bool {
	if old == nil || cur == nil || len(old.Containers) != len(cur.Containers) || len(old.Sandboxes) != len(cur.Sandboxes) {
		return false
	}
	for i, c := range cur.Containers {
		if o := old.Containers[i]; o.Id != c.Id || plegStateOf(o.State) != plegStateOf(c.State) {
			return false
		}
	}
	for i, sb := range cur.Sandboxes {
		if o := old.Sandboxes[i]; o.Id != sb.Id || o.State != sb.State {
			return false
		}
	}
	return true
}

// containerEvents are the kubelet generic PLEG's events for one container's transition.
func containerEvents(pod PodRef, id string, old, cur plegState) []Event {
	ev := func(t EventType) Event { return Event{Pod: pod, Type: t, ContainerID: id} }
	switch {
	case cur == old:
		return nil
	case cur == plegRunning:
		return []Event{ev(ContainerStarted)}
	case cur == plegExited:
		return []Event{ev(ContainerDied)}
	case cur == plegUnknown:
		return []Event{ev(ContainerChanged)}
	case old == plegExited: // gone, its death already reported
		return []Event{ev(ContainerRemoved)}
	default: // gone without being seen exited
		return []Event{ev(ContainerDied), ev(ContainerRemoved)}
	}
}
