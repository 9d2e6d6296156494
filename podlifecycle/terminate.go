package podlifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// defaultGracePeriod is the API's default terminationGracePeriodSeconds.
const defaultGracePeriod = 30

// minStopTimeout is the shortest stop timeout a container gets (the kubelet's minimumGracePeriodInSeconds).
const minStopTimeout = 2

// killOp is a stop of a pod's containers running in the background.
type killOp struct {
	grace    int64
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
func (w *podWorker) effectiveGracePeriod(pod *corev1.Pod) int64 {
	g := int64(defaultGracePeriod)
	if pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod != nil && pod.DeletionGracePeriodSeconds != nil {
		g = *pod.DeletionGracePeriodSeconds
	}
	if w.gracePeriod >= 0 && w.gracePeriod < g {
		g = w.gracePeriod
	}
	if g < 1 {
		g = 1
	}
	w.gracePeriod = g
	return g
}

// terminatePod is the kubelet's SyncTerminatingPod and SyncTerminatedPod: stop the containers within
// the grace period, then tear the sandbox down. The pass it returns carries the runtime state the final
// status is computed from and, for a deleted pod, asks for the API object's removal after that status.
func (r *Reconciler) terminatePod(ctx context.Context, w *podWorker, pod *corev1.Pod, st *runtime.PodStatus) pass {
	if w.stage() == terminating {
		if w.terminatingSince.IsZero() {
			w.terminatingSince = r.clock.Now()
		}
		if running := runningContainers(st); len(running) > 0 {
			r.ensureKill(ctx, w, pod, running)
			return pass{status: st}
		}
		if w.kill != nil && !w.kill.finished() {
			return pass{} // the stop reports when it is done
		}
		w.setState(terminated)
	}
	if err := r.teardown(ctx, w, st); err != nil {
		return pass{err: err}
	}
	st, _, err := r.readPod(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return pass{err: err}
	}
	return pass{status: st, deleteAfter: pod.DeletionTimestamp != nil}
}

// terminateOrphan stops and removes a UID that is not (or no longer) desired under its name: a pod
// force-deleted from the API, a name reused with a new UID, or a pod left by an earlier run. It returns
// true once nothing of it is left in the runtime.
func (r *Reconciler) terminateOrphan(ctx context.Context, w *podWorker) (bool, result) {
	log := ctrl.LoggerFrom(ctx).WithValues("podUID", w.uid)
	st, _, err := r.readPod(ctx, w.uid, w.key.Name, w.key.Namespace)
	if err != nil {
		log.Error(err, "Failed to read the runtime state of an orphaned pod")
		return false, result{after: time.Second}
	}
	w.setState(terminating)
	if running := runningContainers(st); len(running) > 0 {
		r.ensureKill(ctx, w, w.pod, running)
		return false, result{}
	}
	if w.kill != nil && !w.kill.finished() {
		return false, result{}
	}
	w.setState(terminated)
	if err := r.teardown(ctx, w, st); err != nil {
		log.Error(err, "Failed to tear down an orphaned pod")
		return false, result{after: time.Second}
	}
	if err := r.removePod(ctx, w, st); err != nil {
		log.Error(err, "Failed to remove an orphaned pod")
		return false, result{after: time.Second}
	}
	log.Info("Removed pod that is no longer desired")
	r.forget(w)
	return true, result{}
}

func runningContainers(st *runtime.PodStatus) []*runtime.ContainerStatus {
	var out []*runtime.ContainerStatus
	for _, c := range st.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			out = append(out, c)
		}
	}
	return out
}

// ensureKill starts stopping the running containers, or restarts an ongoing stop when the grace period
// shrank (a shorter one takes effect at once).
func (r *Reconciler) ensureKill(ctx context.Context, w *podWorker, pod *corev1.Pod, running []*runtime.ContainerStatus) {
	grace := w.effectiveGracePeriod(pod)
	if w.kill != nil && !w.kill.finished() {
		deadline := r.clock.Now().Add(time.Duration(grace) * time.Second)
		if !deadline.Before(w.kill.deadline) {
			return
		}
		ctrl.LoggerFrom(ctx).Info("Grace period shortened, stopping containers sooner", "gracePeriod", grace)
		w.kill.cancel()
	}
	kills := make([]killAction, 0, len(running))
	for _, c := range running {
		kills = append(kills, killAction{container: c})
	}
	r.startKill(ctx, w, pod, kills, grace)
}

// startKill stops containers in the background within grace seconds: every preStop hook at once, then
// SIGTERM with the time that is left, SIGKILL at its end; a sidecar only once the regular containers and
// the sidecars declared after it have stopped (stopOrder). The pod is enqueued when all are stopped.
func (r *Reconciler) startKill(ctx context.Context, w *podWorker, pod *corev1.Pod, kills []killAction, grace int64) {
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	op := &killOp{grace: grace, deadline: r.clock.Now().Add(time.Duration(grace) * time.Second), cancel: cancel, done: make(chan struct{})}
	w.kill = op
	go func() {
		defer close(op.done)
		defer cancel()
		r.killAll(kctx, pod, kills, op.deadline)
		r.changed(w.uid)
		r.enqueue(w.key)
	}()
}

// killAll stops containers in parallel, each with the time left until deadline, in the kubelet's
// termination order.
func (r *Reconciler) killAll(ctx context.Context, pod *corev1.Pod, kills []killAction, deadline time.Time) {
	order := newStopOrder(pod, kills)
	var wg sync.WaitGroup
	for _, k := range kills {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.killContainer(ctx, pod, k, deadline, order)
		}()
	}
	wg.Wait()
}

// killContainer runs the preStop hook (bounded by the grace period), waits for its turn in order (nil:
// none), then stops the container with the time that remains.
func (r *Reconciler) killContainer(ctx context.Context, pod *corev1.Pod, k killAction, deadline time.Time, order *stopOrder) {
	c := k.container
	spec := containerSpec(pod, c.Name)
	msg := k.message
	if msg == "" {
		msg = "Stopping container " + c.Name
	}
	if pod != nil {
		r.recorder.Event(containerRef(pod, spec), corev1.EventTypeNormal, "Killing", msg)
	}
	if k.grace != nil {
		if d := r.clock.Now().Add(time.Duration(max(*k.grace, 1)) * time.Second); d.Before(deadline) {
			deadline = d
		}
	}
	if hook := preStopHandler(spec, c); hook != nil {
		hctx, cancel := context.WithDeadline(ctx, deadline)
		r.runPreStop(hctx, pod, spec, c, hook)
		cancel()
	}
	defer order.done(c.Name)
	order.waitForTurn(ctx, r.clock, c.Name, deadline)
	// As the kubelet, always leave a container a short window to stop before SIGKILL, even when the
	// preStop hook or the wait for its turn used up the grace period.
	remaining := max(int64(deadline.Sub(r.clock.Now()).Round(time.Second)/time.Second), minStopTimeout)
	if err := r.cri.StopContainer(ctx, c.ID, remaining); err != nil && !errors.Is(err, runtime.ErrNotFound) && ctx.Err() == nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to stop container", "containerID", c.ID, "container", c.Name)
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

// teardown stops the pod's sandboxes (network torn down, pause process gone). Containers are kept for
// their logs until the pod is removed.
func (r *Reconciler) teardown(ctx context.Context, w *podWorker, st *runtime.PodStatus) error {
	if w.tornDown {
		return nil
	}
	for _, sb := range st.Sandboxes {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			err := r.cri.StopPodSandbox(ctx, sb.Id)
			r.changed(w.uid)
			if err != nil && !errors.Is(err, runtime.ErrNotFound) {
				return err
			}
		}
	}
	if err := r.volumes.TearDown(ctx, w.uid); err != nil {
		return fmt.Errorf("tear down volumes: %w", err)
	}
	w.tornDown = true
	return nil
}

// removePod removes the pod's containers, sandboxes and directories.
func (r *Reconciler) removePod(ctx context.Context, w *podWorker, st *runtime.PodStatus) error {
	defer r.changed(w.uid)
	for _, c := range st.Containers {
		if err := r.cri.RemoveContainer(ctx, c.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return err
		}
	}
	for _, sb := range st.Sandboxes {
		if err := r.cri.RemovePodSandbox(ctx, sb.Id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return err
		}
	}
	r.removePodCgroup(ctx, w.uid)
	// Never remove the pod directory through a mount that is still there.
	if err := r.volumes.TearDown(ctx, w.uid); err != nil {
		return fmt.Errorf("tear down volumes: %w", err)
	}
	if err := removeDir(podconfig.PodDir(r.rootDir, w.uid)); err != nil {
		return err
	}
	if r.sandboxOpts.PodLogsDir != "" {
		stub := &corev1.Pod{}
		stub.Namespace, stub.Name, stub.UID = w.key.Namespace, w.key.Name, w.uid
		if err := removeDir(podconfig.PodLogDir(r.sandboxOpts.PodLogsDir, stub)); err != nil {
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

// finishDeletion removes what the runtime holds and then the API object, with grace 0 and a UID
// precondition so a new pod under the same name is never deleted by mistake.
func (r *Reconciler) finishDeletion(ctx context.Context, w *podWorker, pod *corev1.Pod) error {
	st, _, err := r.readPod(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return err
	}
	if err := r.removePod(ctx, w, st); err != nil {
		return err
	}
	err = r.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: ptr.To(pod.UID)})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Pod deleted from the API after termination")
	r.forget(w)
	return nil
}
