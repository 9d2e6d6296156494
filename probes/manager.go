package probes

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/podrules"
)

// Execer runs a command in a container (nodelet's CRI client satisfies it).
type Execer interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error)
}

// Recorder records events; client-go's record.EventRecorder satisfies it.
type Recorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
}

// Manager runs the probe workers of the pods it is told about and caches their results by container ID.
// Set the exported fields before the first Sync and do not change them afterwards. The zero value of the
// unexported state is ready to use.
type Manager struct {
	// Exec runs exec probes.
	Exec Execer
	// Clock times initial delays and periods; nil means the real clock.
	Clock clock.WithTicker
	// Recorder receives the Unhealthy and ProbeWarning events; nil records none.
	Recorder Recorder
	// OnChange is called (from a worker goroutine) with the pod's namespace/name whenever a result
	// changes: readiness/startup flips, or liveness/startup turning Failure (the reconciler then kills and
	// restarts per restart policy). It must not block.
	OnChange func(key types.NamespacedName)
	// Simulate, when set, answers every probe in place of running it (simulated nodes: no processes, no
	// network). A container it says fails readiness is held unready even without a readiness probe.
	Simulate SimulateFunc
	// Metrics receives every probe run that produced a result (the kubelet's prober metrics, *Metrics);
	// nil records none.
	Metrics MetricsRecorder

	mu   sync.Mutex
	pods map[types.UID]*podState
	byID map[string]*target
	// observed are the probes with series in Metrics, by pod UID, kept until the pod is removed (a
	// container's series outlive its attempts, as the kubelet's outlive them in its one worker).
	observed map[types.UID]map[workerKey]ProbeLabels

	httpOnce sync.Once
	http     *httpProber
}

// SimulateFunc says whether the probe of kind ("Liveness", "Readiness" or "Startup") of the pod's
// container succeeds. It is asked on every sync of the pod, so a changed answer takes effect at the next.
type SimulateFunc func(pod *corev1.Pod, container, kind string) bool

// ContainerInfo is what the reconciler knows of a running container attempt.
type ContainerInfo struct {
	Name, ID  string
	StartedAt time.Time
	Running   bool
}

// podState is what the manager holds for one pod UID.
type podState struct {
	ips     []string
	workers map[workerKey]*worker
	targets map[string]*target // by container ID
}

// workerKey names a worker within its pod.
type workerKey struct {
	container string
	kind      probeType
}

// Sync starts workers for the probes of running containers and stops workers of containers that are gone
// or restarted (a new container ID = new workers; results of the old ID are dropped). podIPs give the
// default host of http/tcp/grpc probes. Call it on every sync of a running pod with all of its containers,
// also while it terminates: readiness keeps probing then, liveness and startup stop.
func (m *Manager) Sync(pod *corev1.Pod, podIPs []string, containers []ContainerInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.podLocked(pod.UID)
	ps.ips = append([]string(nil), podIPs...)
	live := map[string]string{}
	for _, c := range containers {
		spec, kind := podrules.FindContainer(pod, c.Name)
		if !c.Running || c.ID == "" || kind == podrules.NoContainer || kind == podrules.EphemeralContainer {
			continue
		}
		live[c.Name] = c.ID
		m.ensureTargetLocked(ps, pod, spec, c.ID)
		for _, kind := range probeTypes {
			m.ensureWorkerLocked(ps, pod, spec, c, kind)
		}
	}
	m.dropStaleLocked(ps, pod, live)
}

// RemovePod stops all workers of the pod UID and drops its results and its probes' metric series.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetPodLocked(uid)
	ps := m.pods[uid]
	if ps == nil {
		return
	}
	for key, w := range ps.workers {
		w.cancel()
		delete(ps.workers, key)
	}
	for id := range ps.targets {
		delete(m.byID, id)
	}
	delete(m.pods, uid)
}

// Ready reports whether the container is ready by its readiness probe; known is false while the probe has
// not produced a result yet (the container is not ready then). A started container without a readiness
// probe is ready; a container whose startup probe has not succeeded is not. A container ID Sync was never
// given is (false, false).
func (m *Manager) Ready(containerID string) (ready, known bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.byID[containerID]
	if t == nil {
		return false, false
	}
	if started, known := t.started(); !started {
		return false, known
	}
	if m.Simulate != nil && !t.simulated[readiness] {
		return false, true
	}
	return t.outcome(readiness)
}

// Started reports whether the container's startup probe has succeeded; known is false while it has not
// produced a result yet. A container without a startup probe is started. A container ID Sync was never
// given is (false, false).
func (m *Manager) Started(containerID string) (started, known bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.byID[containerID]
	if t == nil {
		return false, false
	}
	return t.started()
}

// LivenessFailed reports whether the container must be killed because its liveness probe (or startup
// probe) reached failureThreshold, with the kubelet's message ("Container app failed liveness probe, will
// be restarted"; without ", will be restarted" when the restart policy does not restart it) and the
// probe's terminationGracePeriodSeconds override if set. It is false for a pod being deleted.
func (m *Manager) LivenessFailed(containerID string) (failed bool, message string, gracePeriod *int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.byID[containerID]
	if t == nil || t.deleting {
		return false, "", nil
	}
	for _, kind := range []probeType{liveness, startup} {
		if t.results[kind] == resultFailure {
			return true, t.killMessage(kind), copyInt64(t.probes[kind].TerminationGracePeriodSeconds)
		}
	}
	return false, "", nil
}

// podLocked returns the pod's state, creating it.
func (m *Manager) podLocked(uid types.UID) *podState {
	if m.pods == nil {
		m.pods = map[types.UID]*podState{}
		m.byID = map[string]*target{}
	}
	ps := m.pods[uid]
	if ps == nil {
		ps = &podState{workers: map[workerKey]*worker{}, targets: map[string]*target{}}
		m.pods[uid] = ps
	}
	return ps
}

// ensureTargetLocked records a running container attempt, keeping the results it already has.
func (m *Manager) ensureTargetLocked(ps *podState, pod *corev1.Pod, spec *corev1.Container, id string) {
	t := ps.targets[id]
	if t == nil {
		t = newTarget(pod, spec)
		ps.targets[id] = t
		m.byID[id] = t
	}
	t.deleting = pod.DeletionTimestamp != nil
	if m.Simulate != nil {
		for _, kind := range probeTypes {
			t.simulated[kind] = m.Simulate(pod, spec.Name, kind.String())
		}
	}
}

// ensureWorkerLocked keeps the container's worker of one probe type on its current attempt: a worker of
// an older attempt is replaced, none runs without a probe, and liveness/startup stop once the pod is
// being deleted.
func (m *Manager) ensureWorkerLocked(ps *podState, pod *corev1.Pod, spec *corev1.Container, c ContainerInfo, kind probeType) {
	key := workerKey{container: c.Name, kind: kind}
	wanted := kind.of(spec) != nil && (pod.DeletionTimestamp == nil || kind == readiness)
	if !wanted {
		m.forgetLocked(pod.UID, key) // as the kubelet's liveness and startup workers stopped for a deletion
	}
	old := ps.workers[key]
	if old != nil && (!wanted || old.containerID != c.ID) {
		old.cancel()
		delete(ps.workers, key)
		old = nil
	}
	if !wanted || old != nil {
		return
	}
	w := newWorker(m, pod, spec, c, kind)
	ps.workers[key] = w
	ctx, cancel := context.WithCancel(logf.IntoContext(context.Background(), m.logger(w)))
	w.cancel = cancel
	go w.run(ctx)
}

// dropStaleLocked stops the workers and drops the results of container attempts that no longer run.
func (m *Manager) dropStaleLocked(ps *podState, pod *corev1.Pod, live map[string]string) {
	for key, w := range ps.workers {
		if live[key.container] != w.containerID {
			w.cancel()
			delete(ps.workers, key)
		}
	}
	for id, t := range ps.targets {
		if live[t.name] != id {
			delete(ps.targets, id)
			delete(m.byID, id)
		}
	}
	if len(ps.workers) == 0 && len(ps.targets) == 0 {
		delete(m.pods, pod.UID)
	}
}

// logger is the worker's logger.
func (m *Manager) logger(w *worker) klog.Logger {
	return logf.Log.WithName("probes").WithValues("pod", klog.KRef(w.pod.Namespace, w.pod.Name),
		"podUID", w.podUID, "containerName", w.container.Name, "containerID", w.containerID, "probeType", w.kind)
}

// clock is the injected clock or the real one.
func (m *Manager) clock() clock.WithTicker {
	if m.Clock == nil {
		return clock.RealClock{}
	}
	return m.Clock
}

// podIP is the pod's primary IP as last synced, or "" when it has none.
func (m *Manager) podIP(uid types.UID) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ps := m.pods[uid]; ps != nil && len(ps.ips) > 0 {
		return ps.ips[0]
	}
	return ""
}

// isStarted reports whether the worker's container has started (no startup probe, or it succeeded).
func (m *Manager) isStarted(w *worker) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.byID[w.containerID]
	if t == nil {
		return false
	}
	started, _ := t.started()
	return started
}

// setResult stores a worker's result if the worker is still current, and reports a change through
// OnChange. A startup success triggers the container's liveness and readiness workers at once.
func (m *Manager) setResult(w *worker, r result) {
	changed, triggers := m.storeResult(w, r)
	for _, t := range triggers {
		t.poke()
	}
	if changed && m.OnChange != nil {
		m.OnChange(w.pod)
	}
}

// storeResult writes the result under the lock; it returns whether the effective result changed and the
// workers to trigger.
func (m *Manager) storeResult(w *worker, r result) (changed bool, triggers []*worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.pods[w.podUID]
	t := m.byID[w.containerID]
	if ps == nil || t == nil || ps.workers[workerKey{container: w.container.Name, kind: w.kind}] != w {
		return false, nil
	}
	prev := t.effective(w.kind)
	t.results[w.kind] = r
	if w.kind == startup && r == resultSuccess {
		for _, kind := range []probeType{readiness, liveness} {
			if other := ps.workers[workerKey{container: w.container.Name, kind: kind}]; other != nil {
				triggers = append(triggers, other)
			}
		}
	}
	return prev != r, triggers
}

// copyInt64 returns a copy of p.
func copyInt64(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// simulated is the simulation's answer for the worker's probe.
func (m *Manager) simulated(w *worker) outcome {
	m.mu.Lock()
	t := m.byID[w.containerID]
	ok := t != nil && t.simulated[w.kind]
	m.mu.Unlock()
	if ok {
		return success("")
	}
	return failure("simulated " + w.kind.String() + " probe failure")
}

// observe records a probe run of a current worker in Metrics.
func (m *Manager) observe(w *worker, result string, took time.Duration) {
	if m.Metrics == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.pods[w.podUID]
	key := workerKey{container: w.container.Name, kind: w.kind}
	if ps == nil || ps.workers[key] != w {
		return // stopped: a removed pod's series must not come back
	}
	m.Metrics.Observe(w.labels, result, took)
	if m.observed == nil {
		m.observed = map[types.UID]map[workerKey]ProbeLabels{}
	}
	if m.observed[w.podUID] == nil {
		m.observed[w.podUID] = map[workerKey]ProbeLabels{}
	}
	m.observed[w.podUID][key] = w.labels
}

// forgetLocked drops the series of one probe of a pod, if it has any.
func (m *Manager) forgetLocked(uid types.UID, key workerKey) {
	labels, ok := m.observed[uid][key]
	if !ok {
		return
	}
	m.Metrics.Forget(labels)
	delete(m.observed[uid], key)
	if len(m.observed[uid]) == 0 {
		delete(m.observed, uid)
	}
}

// forgetPodLocked drops the series of every probe of a pod.
func (m *Manager) forgetPodLocked(uid types.UID) {
	for key := range m.observed[uid] {
		m.forgetLocked(uid, key)
	}
}
