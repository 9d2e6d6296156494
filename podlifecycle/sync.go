package podlifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/podstatus"
	"github.com/nodelet/nodelet/probes"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// syncPod is the kubelet's SyncPod for a pod that should run: create the sandbox if needed, stop what
// must stop, start what must start. The pass it returns carries the runtime state the pod's status is
// computed from.
//
// st is the pod's runtime state of cache generation gen. The sync reads nothing else of the pod but what
// its own actions created (the new sandbox, the containers it started), and keeps the state they leave
// in the cache for the next sync.
func (r *Reconciler) syncPod(ctx context.Context, w *podWorker, pod *corev1.Pod, st *runtime.PodStatus, gen uint64) pass {
	var res result
	r.syncProbes(pod, st)
	restartAll := r.restartingAllContainers(ctx, w, pod, st)
	acts := computePodActions(pod, st, r.probeResults(), restartAll)
	if acts.killPod {
		r.recorder.Event(podRef(pod), corev1.EventTypeNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
		r.startKill(ctx, w, pod, acts.kill, w.effectiveGracePeriod(pod))
		return pass{status: st}
	}
	if acts.done {
		w.setState(terminating)
		r.enqueue(w.key)
		return pass{status: st}
	}
	if acts.createSandbox {
		id, wait, err := r.createSandbox(ctx, w, pod, acts.sandboxAttempt)
		if id == "" {
			res.requeueAfter(wait)
			return pass{res: res, err: err, status: st}
		}
		sb, err := r.cri.SandboxStatus(ctx, id)
		if err != nil {
			r.changed(pod.UID)
			return pass{res: res, err: err}
		}
		st = st.WithSandbox(sb)
		r.keep(pod.UID, st, gen)
		acts = computePodActions(pod, st, r.probeResults(), restartAll)
	}
	if len(acts.reset) > 0 {
		return pass{err: r.resetPod(ctx, w, pod, acts.reset), status: st}
	}
	if len(acts.kill) > 0 {
		r.startKill(ctx, w, pod, acts.kill, w.effectiveGracePeriod(pod))
	}
	st, err := r.startInSandbox(ctx, w, pod, st, gen, acts.start, &res)
	if err != nil {
		return pass{res: res, err: err}
	}
	res.requeueAfter(r.deadlineRemaining(w, pod))
	res.requeueAfter(r.resyncPeriod)
	return pass{res: res, status: st}
}

// startInSandbox sets up (or refreshes) the pod's volumes, then starts the containers due in its ready sandbox,
// and returns the runtime state after the starts: st (of cache generation gen) with the status of each
// container it created, read back one by one.
func (r *Reconciler) startInSandbox(ctx context.Context, w *podWorker, pod *corev1.Pod, st *runtime.PodStatus, gen uint64,
	start []startAction, res *result) (*runtime.PodStatus, error) {
	sb := st.ReadySandbox()
	if sb == nil {
		return st, nil
	}
	// Volumes are set up before the first container and refreshed on every sync after (ConfigMap,
	// Secret and downward API changes reach running pods within a sync period).
	if !r.setUpVolumes(ctx, w, pod) && len(start) > 0 {
		// Containers start once every volume is ready; a volume waiting to be attached is looked at again
		// soon (the kubelet polls every 300 ms while it waits).
		res.requeueAfter(500 * time.Millisecond)
		return st, nil
	}
	if len(start) == 0 {
		return st, nil
	}
	sbCfg, err := r.sandboxConfig(pod, sb.GetMetadata().GetAttempt())
	if err != nil {
		return st, err
	}
	var created []string
	for _, s := range start {
		sres, id := r.startContainer(ctx, w, pod, sb.Id, sbCfg, st, s)
		res.merge(sres)
		if id != "" {
			created = append(created, id)
		}
	}
	for _, id := range created {
		c, err := r.cri.ReadContainer(ctx, id, sb.Id)
		if err != nil {
			r.changed(pod.UID)
			return st, err
		}
		st = st.WithContainer(c)
	}
	if len(created) > 0 {
		r.keep(pod.UID, st, gen)
	}
	r.syncProbes(pod, st)
	return st, nil
}

func (r *Reconciler) sandboxConfig(pod *corev1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	r.reportMissingClusterDNS(pod)
	cfg, err := podconfig.SandboxConfig(pod, attempt, r.sandboxOpts)
	if err != nil {
		return nil, fmt.Errorf("sandbox config for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return cfg, nil
}

// createSandbox prepares the pod's directories and runs its sandbox, and returns its ID ("" when it did
// not run, with the time to wait before the next attempt). A failure is reported as the
// kubelet does (FailedCreatePodSandBox) and retried with back-off.
func (r *Reconciler) createSandbox(ctx context.Context, w *podWorker, pod *corev1.Pod, attempt uint32) (string, time.Duration, error) {
	bkey := string(pod.UID) + "/sandbox"
	if wait := r.sandboxBackoff.InBackOffSinceUpdate(bkey); wait > 0 {
		return "", wait, nil
	}
	cfg, err := r.sandboxConfig(pod, attempt)
	if err == nil && !r.ensurePodCgroup(ctx, pod, cfg) {
		r.sandboxBackoff.Next(bkey, r.clock.Now())
		return "", r.sandboxBackoff.Delay(bkey), nil
	}
	if err == nil {
		err = r.makePodDirs(pod, cfg.LogDirectory)
	}
	var handler string
	if err == nil {
		handler, err = podconfig.RuntimeHandler(pod, func(name string) (string, error) {
			if r.secrets == nil {
				return "", fmt.Errorf("runtime class %q: no API access", name)
			}
			return r.secrets.RuntimeHandler(ctx, name)
		})
	}
	var id string
	if err == nil {
		start := r.clock.Now()
		id, err = r.cri.RunPodSandbox(ctx, cfg, handler)
		r.metrics.sandboxDuration.Observe(r.clock.Since(start).Seconds())
	}
	if err != nil {
		r.sandboxBackoff.Next(bkey, r.clock.Now())
		r.recorder.Eventf(podRef(pod), corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
		ctrl.LoggerFrom(ctx).Error(err, "Failed to create pod sandbox")
		return "", r.sandboxBackoff.Delay(bkey), nil
	}
	r.sandboxBackoff.Reset(bkey)
	ctrl.LoggerFrom(ctx).V(1).Info("Created pod sandbox", "podSandboxID", id, "attempt", attempt)
	return id, 0, nil
}

// makePodDirs creates <root>/pods/<uid> and the pod's log directory.
func (r *Reconciler) makePodDirs(pod *corev1.Pod, logDir string) error {
	podDir, err := podconfig.PodDir(r.rootDir, pod.UID)
	if err != nil {
		return err
	}
	for _, d := range []string{podDir, logDir} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create pod directory: %w", err)
		}
	}
	return nil
}

// backoffKey identifies a container for the crash-loop back-off (the kubelet's GetBackoffKey).
func backoffKey(pod *corev1.Pod, c *corev1.Container) string {
	return fmt.Sprintf("%s_%s_%s_%s_%x", pod.Name, pod.Namespace, pod.UID, c.Name, podconfig.HashContainer(c))
}

// formatPod names a pod as the kubelet's messages do: name_namespace(uid).
func formatPod(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// startContainer takes one container from nothing to running: back-off, image, environment, files,
// create, start, postStart hook. Any step that cannot finish now records why the container waits. It
// returns the ID of the container it created, if it got that far.
func (r *Reconciler) startContainer(ctx context.Context, w *podWorker, pod *corev1.Pod, sandboxID string,
	sbCfg *runtimeapi.PodSandboxConfig, st *runtime.PodStatus, s startAction) (result, string) {
	c := s.container
	if s.lastExit == nil && s.restartCount == 0 {
		// The runtime holds no attempt of it: count the attempts by their logs, as the kubelet does.
		s.restartCount = restartCountFromLogs(r.containerLogDir(pod, c.Name))
	}
	key := backoffKey(pod, c)
	if s.lastExit != nil {
		if wait := r.crash.InBackOffSince(key, s.lastExit.FinishedAt); wait > 0 {
			r.recorder.Eventf(containerRef(pod, c), corev1.EventTypeWarning, "BackOff",
				"Back-off restarting failed container %s in pod %s", c.Name, formatPod(pod))
			w.setWaiting(c.Name, podstatus.Waiting{Reason: "CrashLoopBackOff", Message: fmt.Sprintf(
				"back-off %s restarting failed container=%s pod=%s", r.crash.Delay(key), c.Name, formatPod(pod))})
			return result{after: wait}, ""
		}
	}
	creds := func() pullCredentials { return r.pullCredentials(ctx, pod, c.Image) }
	img := r.puller.Ensure(ctx, w.key.String(), pod, c, creds, sbCfg)
	if img.waiting != nil {
		w.waitForImage(c.Name, *img.waiting)
		return result{after: img.retryIn}, ""
	}
	volumeImages, waiting, retry := r.ensureImageVolumes(ctx, w, pod, c, sbCfg)
	if waiting != nil {
		w.waitForImage(c.Name, *waiting)
		return result{after: retry}, ""
	}
	if s.lastExit != nil {
		// The back-off steps once per restart, when the restart goes ahead: the kubelet pulls the image
		// within the same sync, so a pull (imagePullPolicy Always) must not make a restart count twice
		// (nodelet pulls in the background and comes back once the image is there).
		r.crash.Next(key, s.lastExit.FinishedAt)
	}
	cfg, err := r.containerConfig(ctx, pod, c, s, st, img.ref)
	if err != nil {
		return r.containerFailed(pod, w, c, "CreateContainerConfigError", err, 10*time.Second), ""
	}
	useImageVolumeRefs(cfg.Mounts, c, volumeImages)
	id, err := r.cri.CreateContainer(ctx, sandboxID, cfg, sbCfg)
	if err != nil {
		return r.containerFailed(pod, w, c, "CreateContainerError", err, 10*time.Second), ""
	}
	r.recorder.Event(containerRef(pod, c), corev1.EventTypeNormal, "Created", "Container created")
	if err := r.cri.StartContainer(ctx, id); err != nil {
		return r.containerFailed(pod, w, c, "RunContainerError", err, 10*time.Second), id
	}
	r.recorder.Event(containerRef(pod, c), corev1.EventTypeNormal, "Started", "Container started")
	r.metrics.containerStarts.Inc()
	w.clearWaiting(c.Name)
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		r.runPostStart(w, pod, c, id)
	}
	return result{}, id
}

// waitForImage records why a container waits for its image. A pull under way is no reason of its own: the
// container keeps the kubelet's default waiting reason (PodInitializing in a pod with init containers,
// ContainerCreating otherwise), as the kubelet, which pulls within the sync, never shows another.
func (w *podWorker) waitForImage(name string, waiting podstatus.Waiting) {
	if waiting.Reason == "ContainerCreating" {
		w.clearWaiting(name)
		return
	}
	w.setWaiting(name, waiting)
}

// containerFailed records a failed container step the kubelet's way: a Failed event "Error: <reason>"
// and the container waiting with that reason and message.
func (r *Reconciler) containerFailed(pod *corev1.Pod, w *podWorker, c *corev1.Container, reason string, err error, retry time.Duration) result {
	msg := err.Error()
	r.recorder.Event(containerRef(pod, c), corev1.EventTypeWarning, "Failed", "Error: "+msg)
	w.setWaiting(c.Name, podstatus.Waiting{Reason: reason, Message: msg})
	return result{after: retry}
}

// containerConfig resolves the environment and files of a container and builds its CRI config.
func (r *Reconciler) containerConfig(ctx context.Context, pod *corev1.Pod, c *corev1.Container, s startAction,
	st *runtime.PodStatus, imageRef string) (*runtimeapi.ContainerConfig, error) {
	podIPs := st.IPs
	if pod.Spec.HostNetwork {
		podIPs = r.hostIPs
	}
	var nodeAlloc corev1.ResourceList
	var memCapacity int64
	if n, err := r.node(ctx); err == nil {
		nodeAlloc = n.Status.Allocatable
		memCapacity = n.Status.Capacity.Memory().Value()
	}
	env, envMap, err := r.containerEnv(ctx, pod, c, podIPs, nodeAlloc)
	if err != nil {
		return nil, err
	}
	mounts, err := r.volumes.Mounts(pod, c, envMap)
	if err != nil {
		return nil, err
	}
	devices, err := r.volumes.Devices(pod, c)
	if err != nil {
		return nil, err
	}
	// The image's user, for runAsNonRoot and the user the container runs as (the kubelet's getImageUser).
	imageUID, imageUser, err := podconfig.LookupImageUser(ctx, r.cri, &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image})
	if err != nil {
		return nil, err
	}
	files, err := r.containerFiles(pod, c, podIPs)
	if err != nil {
		return nil, err
	}
	targetID, err := targetContainerID(s, st)
	if err != nil {
		return nil, err
	}
	return podconfig.ContainerConfig(pod, c, s.kind, s.restartCount, podconfig.ContainerOptions{
		ImageUID: imageUID, ImageUsername: imageUser,
		SeccompDefault: r.seccompDefault, SeccompProfileRoot: podconfig.SeccompProfileRoot(r.rootDir), HostResources: r.hostResources,
		Env: env, Mounts: mounts, Devices: devices, PodIPs: podIPs, ImageRef: imageRef, NodeMemoryCapacity: memCapacity,
		Files: files, TargetContainerID: targetID,
	})
}

// containerEnv is the container's environment (the kubelet's makeEnvironmentVariables), as CRI key-values and
// as a map (for subPathExpr); nodeAlloc is the default of a resourceFieldRef on a resource without a limit.
func (r *Reconciler) containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIPs []string,
	nodeAlloc corev1.ResourceList) ([]*runtimeapi.KeyValue, map[string]string, error) {
	serviceEnv, err := r.serviceEnv(ctx, pod)
	if err != nil {
		return nil, nil, err
	}
	env, _, err := podconfig.MakeEnvironment(ctx, pod, c, podconfig.EnvOptions{
		NodeName: r.nodeName, HostIPs: r.hostIPs, PodIPs: podIPs, NodeAllocatable: nodeAlloc, ServiceEnv: serviceEnv,
	}, r.secrets)
	if err != nil {
		return nil, nil, err
	}
	envMap := make(map[string]string, len(env))
	for _, kv := range env {
		envMap[kv.Key] = string(kv.Value)
	}
	return env, envMap, nil
}

// containerFiles are the container's files on the host: the pod's /etc/hosts and the container's termination
// log.
func (r *Reconciler) containerFiles(pod *corev1.Pod, c *corev1.Container, podIPs []string) (podconfig.ContainerFiles, error) {
	podDir, err := podconfig.PodDir(r.rootDir, pod.UID)
	if err != nil {
		return podconfig.ContainerFiles{}, err
	}
	hosts, err := podconfig.EnsureEtcHosts(podDir, pod, podIPs, r.sandboxOpts.ClusterDomain)
	if err != nil {
		return podconfig.ContainerFiles{}, err
	}
	termLog, err := podconfig.NewTerminationLog(podDir, c.Name)
	if err != nil {
		return podconfig.ContainerFiles{}, err
	}
	return podconfig.ContainerFiles{EtcHosts: hosts, TerminationLog: termLog}, nil
}

// targetContainerID is the runtime ID of an ephemeral container's target (its newest attempt), as the
// kubelet's getTargetID resolves it; "" without a target.
func targetContainerID(s startAction, st *runtime.PodStatus) (string, error) {
	if s.target == "" {
		return "", nil
	}
	t := st.FindContainer(s.target)
	if t == nil {
		return "", fmt.Errorf("unable to find target container %v", s.target)
	}
	return t.ID, nil
}

// syncProbes tells the probe workers which containers run now.
func (r *Reconciler) syncProbes(pod *corev1.Pod, st *runtime.PodStatus) {
	infos := make([]probes.ContainerInfo, 0, len(st.Containers))
	seen := map[string]bool{}
	for _, c := range st.Containers { // newest first: the first attempt of a name is the current one
		if seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		infos = append(infos, probes.ContainerInfo{Name: c.Name, ID: c.ID, StartedAt: c.StartedAt,
			Running: c.State == runtimeapi.ContainerState_CONTAINER_RUNNING})
	}
	ips := st.IPs
	if pod.Spec.HostNetwork {
		ips = r.hostIPs
	}
	r.probes.Sync(pod, ips, infos)
}

// probeResults is the probes' view for computePodActions.
func (r *Reconciler) probeResults() probeResults { return r.probes }

// setUpVolumes prepares (and refreshes) the pod's volumes. Each failure is a FailedMount event — once
// per distinct message, not on every sync — and the containers wait in ContainerCreating. It returns
// whether every volume is ready.
func (r *Reconciler) setUpVolumes(ctx context.Context, w *podWorker, pod *corev1.Pod) bool {
	errs := r.volumes.SetUp(ctx, pod)
	seen := map[string]bool{}
	for _, err := range errs {
		var rej podRejection
		if errors.As(err, &rej) {
			r.rejectPod(w, pod, rej.RejectReason(), rej.Error())
			w.setState(terminating) // its sandbox runs: stopped, then the pod is terminated
			r.enqueue(w.key)
			return false
		}
		msg := err.Error()
		seen[msg] = true
		if !w.mountErrors[msg] {
			r.recorder.Event(podRef(pod), corev1.EventTypeWarning, "FailedMount", msg)
			ctrl.LoggerFrom(ctx).Info("Volume set-up failed", "err", msg)
		}
	}
	w.mountErrors = seen
	// Ready once every volume was set up: a volume that waits (for its attach, say) reports no error and
	// holds the containers as a failed one does; a refresh that fails later does not stop them.
	return r.volumes.Ready(pod.UID)
}

// podRejection is a volume set-up failure that rejects the pod (volumes.AttachLimitExceededError): its
// reason is the pod's Failed status reason.
type podRejection interface {
	error
	RejectReason() string
}

// rejectPod records the kubelet's rejection of the pod (its rejectPod): a Warning event with the reason,
// and a Failed status with only the reason and "Pod was rejected: <message>".
func (r *Reconciler) rejectPod(w *podWorker, pod *corev1.Pod, reason, message string) {
	r.recorder.Event(podRef(pod), corev1.EventTypeWarning, reason, message)
	w.override = &podstatus.Override{Phase: corev1.PodFailed, Reason: reason, Message: "Pod was rejected: " + message, Rejected: true}
}
