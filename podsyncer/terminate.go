package podsyncer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// defaultGracePeriod is the API's default terminationGracePeriodSeconds.
const defaultGracePeriod = 30

// killOp is a stop of a pod's containers running in the background.
type killOp struct {
	deadline time.Time
	cancel   context.CancelFunc
	done     chan struct{}
}

func (k *killOp) finished() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// effectiveGracePeriod is the pod's effective grace period (the kubelet's calculateEffectiveGracePeriod): the
// deletion's grace if set, else the spec's; it can only shrink, and is at least 1 s.
func (ps *PodState) effectiveGracePeriod(pod *corev1.Pod) int64 {
	g := int64(defaultGracePeriod)
	if pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod != nil && pod.DeletionGracePeriodSeconds != nil {
		g = *pod.DeletionGracePeriodSeconds
	}
	if ps.gracePeriod >= 0 && ps.gracePeriod < g {
		g = ps.gracePeriod
	}
	if g < 1 {
		g = 1
	}
	ps.gracePeriod = g
	return g
}

// SyncTerminatingPod is the kubelet's SyncTerminatingPod: the pod's running containers are stopped within
// its grace period, in the background (a grace period that shrank restarts the stop sooner). Stopped says
// that nothing runs any more and no stop is in flight: the pod is terminated.
func (s *Syncer) SyncTerminatingPod(ctx context.Context, sc *Scope) Result {
	ps := sc.State
	if ps.terminatingSince.IsZero() {
		ps.terminatingSince = s.clock.Now()
	}
	if running := sc.Runtime.RunningContainers(); len(running) > 0 {
		s.ensureKill(ctx, ps, sc.Pod, running)
		return Result{Status: sc.Runtime}
	}
	if ps.kill != nil && !ps.kill.finished() {
		return Result{} // the stop reports when it is done
	}
	// The pod's ResourceClaims are released once its containers have stopped and before its status says
	// so, as the kubelet does: the claim's deallocation must not race a container still using it.
	if err := s.config.dra.UnprepareResources(ctx, ps.UID); err != nil {
		return Result{Err: err}
	}
	return Result{Status: sc.Runtime, Stopped: true}
}

// SyncTerminatedPod is the kubelet's SyncTerminatedPod: the pod's sandboxes are stopped and its volumes torn
// down, once, and its user namespace released. The result carries the runtime state read after, which the final status is computed from.
// Containers are kept for their logs until RemovePod.
func (s *Syncer) SyncTerminatedPod(ctx context.Context, sc *Scope) Result {
	if err := s.TearDown(ctx, sc); err != nil {
		return Result{Err: err}
	}
	// Its user namespace's IDs may go to another pod now (the kubelet's release at this point).
	s.config.userns.Release(sc.State.UID)
	st, _, err := s.ReadPod(ctx, sc.State.UID, sc.State.Key.Name, sc.State.Key.Namespace)
	if err != nil {
		return Result{Err: err}
	}
	return Result{Status: st}
}

// ensureKill starts stopping the running containers, or restarts an ongoing stop when the grace period
// shrank (a shorter one takes effect at once).
func (s *Syncer) ensureKill(ctx context.Context, ps *PodState, pod *corev1.Pod, running []*runtime.ContainerStatus) {
	grace := ps.effectiveGracePeriod(pod)
	if ps.kill != nil && !ps.kill.finished() {
		deadline := s.clock.Now().Add(time.Duration(grace) * time.Second)
		if !deadline.Before(ps.kill.deadline) {
			return
		}
		ctrl.LoggerFrom(ctx).Info("Grace period shortened, stopping containers sooner", "gracePeriod", grace)
		ps.kill.cancel()
	}
	kills := make([]killAction, 0, len(running))
	for _, c := range running {
		kills = append(kills, killAction{container: c})
	}
	s.startKill(ctx, ps, pod, kills, grace)
}

// startKill stops containers in the background within grace seconds: every preStop hook at once, then
// SIGTERM with the time that is left, SIGKILL at its end; a sidecar only once the regular containers and
// the sidecars declared after it have stopped (stopOrder). The pod is enqueued when all are stopped.
func (s *Syncer) startKill(ctx context.Context, ps *PodState, pod *corev1.Pod, kills []killAction, grace int64) {
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	now := s.clock.Now()
	deadline := now.Add(time.Duration(grace) * time.Second)
	op := &killOp{deadline: deadline, cancel: cancel, done: make(chan struct{})}
	for i := range kills {
		// A probe's kill has a grace period of its own: the stop lasts until the last container's ends.
		kills[i].deadline = killDeadline(now, pod, kills[i], deadline)
		if kills[i].deadline.After(op.deadline) {
			op.deadline = kills[i].deadline
		}
	}
	ps.kill = op
	go func() {
		defer close(op.done)
		defer cancel()
		s.stop.killAll(kctx, pod, kills)
		s.changed(ps.UID)
		s.enqueue(ps.Key)
	}()
}

// killDeadline is when a kill's grace period ends: the pod's (podDeadline), or for a container a failed probe
// kills, the grace period podrules.ContainerKillGracePeriod gives it.
func killDeadline(now time.Time, pod *corev1.Pod, k killAction, podDeadline time.Time) time.Time {
	if k.grace == nil {
		return podDeadline
	}
	return now.Add(time.Duration(max(podrules.ContainerKillGracePeriod(pod, k.grace), 1)) * time.Second)
}

// killAll stops containers in parallel, each with the time left until its deadline, in the kubelet's
// termination order.
func (s *stopper) killAll(ctx context.Context, pod *corev1.Pod, kills []killAction) {
	order := newStopOrder(pod, kills)
	var wg sync.WaitGroup
	for _, k := range kills {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.killContainer(ctx, pod, k, order)
		}()
	}
	wg.Wait()
}

// killContainer runs the preStop hook (bounded by the grace period, which ends at k.deadline), waits for
// its turn in order (nil: none), then stops the container with the time that remains.
func (s *stopper) killContainer(ctx context.Context, pod *corev1.Pod, k killAction, order *stopOrder) {
	c := k.container
	spec := containerSpec(pod, c.Name)
	msg := k.message
	if msg == "" {
		msg = "Stopping container " + c.Name
	}
	if pod != nil {
		s.recorder.Event(containerRef(pod, spec), corev1.EventTypeNormal, "Killing", msg)
	}
	deadline := k.deadline
	if hook := preStopHandler(spec, c); hook != nil && deadline.After(s.clock.Now()) {
		hctx, cancel := context.WithDeadline(ctx, deadline)
		s.runPreStop(hctx, pod, spec, c, hook)
		cancel()
	}
	defer order.done(c.Name)
	order.waitForTurn(ctx, s.clock, c.Name, deadline)
	// As the kubelet, always leave a container a short window to stop before SIGKILL, even when the
	// preStop hook or the wait for its turn used up the grace period.
	remaining := max(int64(deadline.Sub(s.clock.Now()).Round(time.Second)/time.Second), podrules.MinimumGracePeriod)
	if err := s.cri.StopContainer(ctx, c.ID, remaining); err != nil && !errors.Is(err, runtime.ErrNotFound) && ctx.Err() == nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to stop container", "containerID", c.ID, "container", c.Name)
		if pod != nil {
			// The kubelet's event for a pod whose kill failed, its message the kill's sync result.
			s.recorder.Eventf(PodRef(pod), corev1.EventTypeWarning, "FailedKillPod",
				"error killing pod: failed to %q for %q with KillContainerError: %q", "KillContainer", c.Name, err.Error())
		}
	}
}

// containerSpec finds a container of the pod by name, of any kind (nil when the pod is unknown).
func containerSpec(pod *corev1.Pod, name string) *corev1.Container {
	if pod == nil {
		return nil
	}
	c, _ := podrules.FindContainer(pod, name)
	return c
}

// TearDown stops the pod's sandboxes (network torn down, pause process gone) and tears its volumes down,
// once. Containers are kept for their logs until the pod is removed.
func (s *Syncer) TearDown(ctx context.Context, sc *Scope) error {
	ps, st := sc.State, sc.Runtime
	if ps.tornDown {
		return nil
	}
	for _, sb := range st.Sandboxes {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			err := s.cri.StopPodSandbox(ctx, sb.Id)
			s.changed(ps.UID)
			if err != nil && !errors.Is(err, runtime.ErrNotFound) {
				return err
			}
		}
	}
	if err := s.volumes.TearDown(ctx, ps.UID); err != nil {
		return fmt.Errorf("tear down volumes: %w", err)
	}
	ps.tornDown = true
	return nil
}

// RemovePod removes the pod's containers, sandboxes, cgroup and directories, after its termination.
func (s *Syncer) RemovePod(ctx context.Context, sc *Scope) error {
	ps, st := sc.State, sc.Runtime
	defer s.changed(ps.UID)
	for _, c := range st.Containers {
		if err := s.cri.RemoveContainer(ctx, c.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return err
		}
	}
	for _, sb := range st.Sandboxes {
		if err := s.cri.RemovePodSandbox(ctx, sb.Id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return err
		}
	}
	s.cgroups.removePodCgroup(ctx, ps.UID)
	// Never remove the pod directory through a mount that is still there.
	if err := s.volumes.TearDown(ctx, ps.UID); err != nil {
		return fmt.Errorf("tear down volumes: %w", err)
	}
	if err := removeDir(podconfig.PodDir(s.rootDir, ps.UID)); err != nil {
		return err
	}
	if s.sandboxOpts.PodLogsDir != "" {
		stub := &corev1.Pod{}
		stub.Namespace, stub.Name, stub.UID = ps.Key.Namespace, ps.Key.Name, ps.UID
		if err := removeDir(podconfig.PodLogDir(s.sandboxOpts.PodLogsDir, stub)); err != nil {
			return err
		}
	}
	return nil
}

// removeDir removes the directory a path builder named. Identifiers that cannot be part of a path (a
// hostile UID, namespace or name, e.g. from a container's labels) have no directory — the agent never made
// one, as the path builders refuse them — so there is nothing to remove.
func removeDir(dir string, err error) error {
	if errors.Is(err, podrules.ErrUnsafePathSegment) {
		return nil
	}
	if err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
