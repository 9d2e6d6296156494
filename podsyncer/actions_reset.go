package podsyncer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podstatus"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// resetAction is a container attempt to remove when all containers restart in place.
type resetAction struct {
	container *runtime.ContainerStatus
	// kill: it has not exited: stop it first.
	kill bool
}

// resetStopTimeout is the kubelet's minimum grace period: a container reset for RestartAllContainers is
// stopped with a grace period of 0, which the kubelet raises to this, and without its preStop hook.
const resetStopTimeout = 2

// resetActions lists every attempt of every init and regular container of the pod, in every sandbox, in
// the kubelet's order: the regular then the init containers that did not fire the rule, then the regular
// then the init containers whose exit matches a RestartAllContainers rule.
func resetActions(pod *corev1.Pod, st *runtime.PodStatus) []resetAction {
	srcInit, dstInit := resetOf(pod.Spec.InitContainers, st)
	srcRegular, dstRegular := resetOf(pod.Spec.Containers, st)
	out := append(dstRegular, dstInit...)
	out = append(out, srcRegular...)
	return append(out, srcInit...)
}

// resetOf splits the attempts of containers into those that fired RestartAllContainers (sources) and the
// others (targets).
func resetOf(containers []corev1.Container, st *runtime.PodStatus) (sources, targets []resetAction) {
	for i := range containers {
		c := &containers[i]
		for _, at := range st.ContainerAttempts(c.Name) {
			exited := at.State == runtimeapi.ContainerState_CONTAINER_EXITED
			switch {
			case exited && podrules.TriggersRestartAll(c, at.ExitCode):
				sources = append(sources, resetAction{container: at})
			default:
				targets = append(targets, resetAction{container: at, kill: !exited})
			}
		}
	}
	return sources, targets
}

// restartingAllContainers is the AllContainersRestarting condition of the status the pod has before this
// sync acts, which the kubelet hands to its runtime sync: true while a RestartAllContainers rule fired
// and containers of the pod are still to be removed. Like the kubelet's status manager, the worker keeps
// that status as the one the next status builds on: the sync that finds every container gone thus ends
// the restart (the condition turns false) before the first init container starts again.
func (s *Syncer) restartingAllContainers(ctx context.Context, sc *Scope) bool {
	pod := sc.Pod
	if !podrules.AllContainersCouldRestart(&pod.Spec) {
		return false
	}
	status := s.PodStatus(ctx, sc, &pod.Status)
	s.statuses.Keep(pod.UID, status)
	return podstatus.AllContainersRestarting(&status)
}

// resetPod stops (without preStop hooks) and removes the pod's containers for RestartAllContainers, one
// after the other in the order given, then looks at the pod again at once: with its containers gone, the
// pod starts over from its first init container in the same sandbox. Container logs stay.
func (s *Syncer) resetPod(ctx context.Context, ps *PodState, pod *corev1.Pod, resets []resetAction) error {
	defer s.changed(ps.UID)
	log := ctrl.LoggerFrom(ctx)
	for _, rs := range resets {
		c := rs.container
		log.V(1).Info("Removing container before pod restarts", "container", c.Name, "containerID", c.ID)
		if rs.kill {
			spec, _ := podrules.FindContainer(pod, c.Name)
			s.recorder.Event(containerRef(pod, spec), corev1.EventTypeNormal, "Killing", "killing")
			if err := s.cri.StopContainer(ctx, c.ID, resetStopTimeout); err != nil && !errors.Is(err, runtime.ErrNotFound) {
				return fmt.Errorf("stop container %s for RestartAllContainers: %w", c.Name, err)
			}
		}
		if err := s.cri.RemoveContainer(ctx, c.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return fmt.Errorf("remove container %s for RestartAllContainers: %w", c.Name, err)
		}
	}
	s.enqueue(ps.Key)
	return nil
}

// restartCountFromLogs is the restart count of a container that the runtime no longer holds (all its
// containers were removed, as RestartAllContainers does) but whose logs stay: one more than the highest
// <n>.log in its log directory, as the kubelet counts; 0 without any.
func restartCountFromLogs(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	count := 0
	for _, e := range entries {
		m := logFileName.FindStringSubmatch(e.Name())
		if e.IsDir() || m == nil {
			continue
		}
		if n, err := strconv.Atoi(m[1]); err == nil && n+1 > count {
			count = n + 1
		}
	}
	return count
}

// logFileName matches the kubelet's container log files: <restartCount>.log and their rotations.
var logFileName = regexp.MustCompile(`^(\d+)\.log(\..*)?`)

// containerLogDir is the directory of a container's log files; "" when an identifier cannot be part of a
// path (the container's config then fails with that error).
func (b *configBuilder) containerLogDir(pod *corev1.Pod, name string) string {
	dir, err := podconfig.ContainerLogDir(b.sandboxOpts.PodLogsDir, pod, name)
	if err != nil {
		return ""
	}
	return dir
}
