package podsyncer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podstatus"
	"github.com/nodelet/nodelet/probes"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
	"github.com/nodelet/nodelet/timeline"
)

// SyncPod is the kubelet's SyncPod for a pod that should run: create the sandbox if needed, stop what
// must stop, start what must start. The result carries the runtime state the pod's status is computed
// from; Terminate says the pod is to stop now (its containers finished for good, or a volume rejected it).
//
// sc.Runtime is the pod's runtime state of cache generation sc.Gen. The sync reads nothing else of the pod
// but what its own actions created (the new sandbox, the containers it started), and keeps the state they
// leave in the cache for the next sync.
func (s *Syncer) SyncPod(ctx context.Context, sc *Scope) Result {
	ps, pod := sc.State, sc.Pod
	s.syncProbes(pod, sc.Runtime)
	restartAll := s.restartingAllContainers(ctx, sc)
	acts := computePodActions(pod, sc.Runtime, s.probeResults(), restartAll)
	switch {
	case acts.killPod:
		s.recorder.Event(PodRef(pod), corev1.EventTypeNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
		s.startKill(ctx, ps, pod, acts.kill, ps.effectiveGracePeriod(pod))
		return Result{Status: sc.Runtime}
	case acts.done:
		return Result{Status: sc.Runtime, Terminate: true}
	case acts.createSandbox:
		// As the kubelet (its WaitForAttachAndMount before the runtime's SyncPod), the pod's volumes are
		// ready before its sandbox is made: a pod whose volume cannot be mounted has no sandbox, no IP and
		// PodReadyToStartContainers false.
		if ready, rejected := s.setUpVolumes(ctx, ps, pod); rejected || !ready {
			return Result{Requeue: Requeue{After: 500 * time.Millisecond}, Status: sc.Runtime, Terminate: rejected}
		}
		s.timeline.Mark(pod, timeline.VolumesReady, "")
		if res, ok := s.sandboxPhase(ctx, sc, acts.sandboxAttempt); !ok {
			return res
		}
		acts = computePodActions(pod, sc.Runtime, s.probeResults(), restartAll)
	}
	if len(acts.reset) > 0 {
		return Result{Err: s.resetPod(ctx, ps, pod, acts.reset), Status: sc.Runtime}
	}
	resizeKills, updates := resizeActions(pod, sc.Runtime, s.resize.actuation, acts.kill)
	if kills := append(acts.kill, resizeKills...); len(kills) > 0 {
		s.startKill(ctx, ps, pod, kills, ps.effectiveGracePeriod(pod))
	}
	resizeErr := s.resize.phase(ctx, sc, len(resizeKills) > 0, updates)
	res := s.startPhase(ctx, sc, acts.start)
	res.Resize = resizeReport(pod, sc.Runtime, s.resize.actuation, resizeErr)
	switch {
	case resizeErr != nil:
		res.Requeue.RequeueAfter(resizeRetry)
	case res.Resize.InProgress:
		res.Requeue.RequeueAfter(time.Second) // a restart for the resize is under way
	}
	return res
}

// resizeRetry is when a resize that failed to apply is tried again.
const resizeRetry = 5 * time.Second

// sandboxPhase creates the pod's sandbox and adds it, read back, to sc.Runtime. ok is false when there is
// none yet: the result says when to try again.
func (s *Syncer) sandboxPhase(ctx context.Context, sc *Scope, attempt uint32) (Result, bool) {
	pod := sc.Pod
	id, wait, err := s.createSandbox(ctx, sc.State, pod, attempt)
	if id == "" {
		return Result{Requeue: Requeue{After: wait}, Err: err, Status: sc.Runtime}, false
	}
	sb, err := s.cri.SandboxStatus(ctx, id)
	if err != nil {
		s.changed(pod.UID)
		return Result{Err: err}, false
	}
	sc.Runtime = sc.Runtime.WithSandbox(sb)
	s.keep(pod.UID, sc.Runtime, sc.Gen)
	return Result{}, true
}

// startPhase sets up the volumes and starts the containers due; a running pod is looked at again within
// the resync period.
func (s *Syncer) startPhase(ctx context.Context, sc *Scope, start []startAction) Result {
	var res Requeue
	st, rejected, err := s.startInSandbox(ctx, sc.State, sc.Pod, sc.Runtime, sc.Gen, start, &res)
	if err != nil {
		return Result{Requeue: res, Err: err}
	}
	sc.Runtime = st
	if rejected {
		return Result{Requeue: res, Status: st, Terminate: true}
	}
	res.RequeueAfter(s.resyncPeriod)
	return Result{Requeue: res, Status: st}
}

// startInSandbox sets up (or refreshes) the pod's volumes, then starts the containers due in its ready sandbox,
// and returns the runtime state after the starts: st (of cache generation gen) with the status of each
// container it created, read back one by one.
func (s *Syncer) startInSandbox(ctx context.Context, ps *PodState, pod *corev1.Pod, st *runtime.PodStatus, gen uint64,
	start []startAction, res *Requeue) (_ *runtime.PodStatus, rejected bool, _ error) {
	sb := st.ReadySandbox()
	if sb == nil {
		return st, false, nil
	}
	// Volumes are set up before the first container and refreshed on every sync after (ConfigMap,
	// Secret and downward API changes reach running pods within a sync period).
	ready, rejected := s.setUpVolumes(ctx, ps, pod)
	if rejected {
		return st, true, nil
	}
	if ready {
		s.timeline.Mark(pod, timeline.VolumesReady, "")
	}
	if !ready && len(start) > 0 {
		// Containers start once every volume is ready; a volume waiting to be attached is looked at again
		// soon (the kubelet polls every 300 ms while it waits).
		res.RequeueAfter(500 * time.Millisecond)
		return st, false, nil
	}
	if len(start) == 0 {
		return st, false, nil
	}
	sbCfg, err := s.config.sandboxConfig(ctx, pod, sb.GetMetadata().GetAttempt())
	if err != nil {
		return st, false, err
	}
	var created []string
	for _, sa := range start {
		sres, id := s.startContainer(ctx, ps, pod, sb.Id, sbCfg, st, sa)
		res.Merge(sres)
		if id != "" {
			created = append(created, id)
		}
	}
	for _, id := range created {
		c, err := s.cri.ReadContainer(ctx, id, sb.Id)
		if err != nil {
			s.changed(pod.UID)
			return st, false, err
		}
		st = st.WithContainer(c)
	}
	if len(created) > 0 {
		s.keep(pod.UID, st, gen)
	}
	s.syncProbes(pod, st)
	return st, false, nil
}

func (b *configBuilder) sandboxConfig(ctx context.Context, pod *corev1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	b.reportMissingClusterDNS(pod)
	opts := b.sandboxOpts
	var err error
	if opts.UserNamespace, err = b.userNamespace(ctx, pod); err != nil {
		return nil, err
	}
	cfg, err := podconfig.SandboxConfig(pod, attempt, opts)
	if err != nil {
		return nil, fmt.Errorf("sandbox config for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return cfg, nil
}

// userNamespace is the user namespace of the pod's sandbox and containers: nil (the node's) unless the
// pod sets hostUsers: false.
func (b *configBuilder) userNamespace(ctx context.Context, pod *corev1.Pod) (*runtimeapi.UserNamespace, error) {
	if !podrules.OwnUserNamespace(pod) {
		return nil, nil
	}
	handler, err := b.runtimeHandler(ctx, pod)
	if err != nil {
		return nil, err
	}
	return b.userns.PodUserNamespace(ctx, pod, handler)
}

// runtimeHandler is the runtime handler of the pod's RuntimeClass ("" without one).
func (b *configBuilder) runtimeHandler(ctx context.Context, pod *corev1.Pod) (string, error) {
	return podconfig.RuntimeHandler(pod, func(name string) (string, error) {
		if b.secrets == nil {
			return "", fmt.Errorf("runtime class %q: no API access", name)
		}
		return b.secrets.RuntimeHandler(ctx, name)
	})
}

// createSandbox prepares the pod's directories and runs its sandbox, and returns its ID ("" when it did
// not run, with the time to wait before the next attempt). A failure is reported as the
// kubelet does (FailedCreatePodSandBox) and retried with back-off.
func (s *Syncer) createSandbox(ctx context.Context, ps *PodState, pod *corev1.Pod, attempt uint32) (string, time.Duration, error) {
	bkey := string(pod.UID) + "/sandbox"
	if wait := s.sandboxBackoff.InBackOffSinceUpdate(bkey); wait > 0 {
		return "", wait, nil
	}
	s.metrics.startedPods.Inc()
	if podrules.OwnUserNamespace(pod) {
		s.metrics.startedUserNamespacedPods.Inc()
		ps.usernsStarting = true
	}
	// The pod's ResourceClaims are prepared before its sandbox, as the kubelet does; a failure is an event
	// and the sandbox waits for the next try.
	if err := s.config.dra.PrepareResources(ctx, pod); err != nil {
		s.usernsStartFailed(ps)
		s.recorder.Eventf(PodRef(pod), corev1.EventTypeWarning, "FailedPrepareDynamicResources", "Failed to prepare dynamic resources: %v", err)
		ctrl.LoggerFrom(ctx).Error(err, "Failed to prepare dynamic resources")
		return "", prepareRetry, nil
	}
	cfg, err := s.config.sandboxConfig(ctx, pod, attempt)
	if err == nil && !s.cgroups.ensurePodCgroup(ctx, ps, pod, cfg) {
		s.sandboxBackoff.Next(bkey, s.clock.Now())
		return "", s.sandboxBackoff.Delay(bkey), nil
	}
	if err == nil && ps.podCgroup != nil {
		if aerr := s.resize.actuation.SetActuatedPodLevel(pod); aerr != nil {
			ctrl.LoggerFrom(ctx).Error(aerr, "Failed to record the pod-level resources of the pod cgroup")
		}
	}
	if err == nil {
		err = s.config.makePodDirs(pod, cfg.LogDirectory)
	}
	var handler string
	if err == nil {
		handler, err = s.config.runtimeHandler(ctx, pod)
	}
	var id string
	if err == nil {
		start := s.clock.Now()
		id, err = s.cri.RunPodSandbox(ctx, cfg, handler)
		s.metrics.sandboxDuration.WithLabelValues(handler).Observe(s.clock.Since(start).Seconds())
		if err != nil {
			s.metrics.sandboxErrors.WithLabelValues(handler).Inc()
		}
	}
	if err != nil {
		s.usernsStartFailed(ps)
		s.sandboxBackoff.Next(bkey, s.clock.Now())
		s.metrics.startedPodsErrors.Inc()
		s.recorder.Eventf(PodRef(pod), corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
		ctrl.LoggerFrom(ctx).Error(err, "Failed to create pod sandbox")
		return "", s.sandboxBackoff.Delay(bkey), nil
	}
	s.sandboxBackoff.Reset(bkey)
	s.timeline.Mark(pod, timeline.SandboxReady, "")
	ctrl.LoggerFrom(ctx).V(1).Info("Created pod sandbox", "podSandboxID", id, "attempt", attempt)
	return id, 0, nil
}

// prepareRetry is when a pod whose ResourceClaims could not be prepared is tried again (a claim not yet
// allocated or reserved, a driver not yet registered).
const prepareRetry = 5 * time.Second

// makePodDirs creates <root>/pods/<uid> and the pod's log directory.
func (b *configBuilder) makePodDirs(pod *corev1.Pod, logDir string) error {
	podDir, err := podconfig.PodDir(b.rootDir, pod.UID)
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
func (s *Syncer) startContainer(ctx context.Context, ps *PodState, pod *corev1.Pod, sandboxID string,
	sbCfg *runtimeapi.PodSandboxConfig, st *runtime.PodStatus, sa startAction) (Requeue, string) {
	c := sa.container
	if sa.created != "" {
		return s.startCreated(ctx, ps, pod, sa)
	}
	if sa.lastExit == nil && sa.restartCount == 0 {
		// The runtime holds no attempt of it: count the attempts by their logs, as the kubelet does.
		sa.restartCount = restartCountFromLogs(s.config.containerLogDir(pod, c.Name))
	}
	key := backoffKey(pod, c)
	if sa.lastExit != nil {
		if wait := s.crash.InBackOffSince(key, sa.lastExit.FinishedAt); wait > 0 {
			s.recorder.Eventf(containerRef(pod, c), corev1.EventTypeWarning, "BackOff",
				"Back-off restarting failed container %s in pod %s", c.Name, formatPod(pod))
			ps.setWaiting(c.Name, podstatus.Waiting{Reason: "CrashLoopBackOff", Message: fmt.Sprintf(
				"back-off %s restarting failed container=%s pod=%s", s.crash.Delay(key), c.Name, formatPod(pod))})
			return Requeue{After: wait}, ""
		}
	}
	creds := func() pullCredentials { return s.config.pullCredentials(ctx, pod, c.Image) }
	img := s.puller.Ensure(ctx, ps.Key.String(), pod, c, creds, sbCfg)
	if img.waiting != nil {
		ps.waitForImage(c.Name, *img.waiting)
		return Requeue{After: img.retryIn}, ""
	}
	volumeImages, waiting, retry := s.ensureImageVolumes(ctx, ps, pod, c, sbCfg)
	if waiting != nil {
		ps.waitForImage(c.Name, *waiting)
		return Requeue{After: retry}, ""
	}
	s.timeline.Mark(pod, timeline.ImageReady, c.Name)
	if sa.lastExit != nil {
		// The back-off steps once per restart, when the restart goes ahead: the kubelet pulls the image
		// within the same sync, so a pull (imagePullPolicy Always) must not make a restart count twice
		// (nodelet pulls in the background and comes back once the image is there).
		s.crash.Next(key, sa.lastExit.FinishedAt)
	}
	s.metrics.startedContainers.WithLabelValues(containerTypeLabel(sa.kind)).Inc()
	cfg, err := s.config.containerConfig(ctx, pod, c, sa, st, img.ref)
	if err != nil {
		return s.containerFailed(pod, ps, sa, "CreateContainerConfigError", err, 10*time.Second), ""
	}
	useImageVolumeRefs(cfg.Mounts, c, volumeImages)
	id, err := s.cri.CreateContainer(ctx, sandboxID, cfg, sbCfg)
	if err != nil {
		return s.containerFailed(pod, ps, sa, "CreateContainerError", err, 10*time.Second), ""
	}
	s.recorder.Event(containerRef(pod, c), corev1.EventTypeNormal, "Created", "Container created")
	s.timeline.Mark(pod, timeline.ContainerCreated, c.Name)
	return s.run(ctx, ps, pod, sa, id)
}

// startCreated starts the container the runtime holds created from the container's definition and never
// started (the agent stopped between creating and starting it): a new attempt would count as a restart.
func (s *Syncer) startCreated(ctx context.Context, ps *PodState, pod *corev1.Pod, sa startAction) (Requeue, string) {
	ctrl.LoggerFrom(ctx).V(1).Info("Starting a container created earlier and never started", "container", sa.container.Name,
		"containerID", sa.created)
	s.metrics.startedContainers.WithLabelValues(containerTypeLabel(sa.kind)).Inc()
	return s.run(ctx, ps, pod, sa, sa.created)
}

// run starts the created container id and runs its postStart hook. The container's resources are recorded
// as actuated first: the runtime holds them from its creation.
func (s *Syncer) run(ctx context.Context, ps *PodState, pod *corev1.Pod, sa startAction, id string) (Requeue, string) {
	c := sa.container
	if sa.kind != runtime.KindEphemeral {
		if err := s.resize.actuation.SetActuated(pod, c); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to record the resources of a new container", "container", c.Name)
		}
	}
	if err := s.cri.StartContainer(ctx, id); err != nil {
		return s.containerFailed(pod, ps, sa, "RunContainerError", err, 10*time.Second), id
	}
	s.recorder.Event(containerRef(pod, c), corev1.EventTypeNormal, "Started", "Container started")
	s.timeline.Mark(pod, timeline.ContainerStarted, c.Name)
	s.metrics.containerStarts.Inc()
	ps.usernsStarting = false
	ps.clearWaiting(c.Name)
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		s.stop.runPostStart(ps, pod, c, id)
	}
	return Requeue{}, id
}

// usernsStartFailed counts a failure of a user namespaced pod's start, once between its sandbox's creation
// and its first container's start (kubelet_started_user_namespaced_pods_errors_total, which the kubelet
// counts once for a sync that creates the sandbox and fails anywhere).
func (s *Syncer) usernsStartFailed(ps *PodState) {
	if ps.usernsStarting {
		ps.usernsStarting = false
		s.metrics.userNamespacedPodErrors.Inc()
	}
}

// waitForImage records why a container waits for its image. A pull under way is no reason of its own: the
// container keeps the kubelet's default waiting reason (PodInitializing in a pod with init containers,
// ContainerCreating otherwise), as the kubelet, which pulls within the sync, never shows another.
func (ps *PodState) waitForImage(name string, waiting podstatus.Waiting) {
	if waiting.Reason == "ContainerCreating" {
		ps.clearWaiting(name)
		return
	}
	ps.setWaiting(name, waiting)
}

// containerFailed records a failed container step the kubelet's way: a Failed event "Error: <reason>"
// and the container waiting with that reason and message.
func (s *Syncer) containerFailed(pod *corev1.Pod, ps *PodState, sa startAction, reason string, err error, retry time.Duration) Requeue {
	c := sa.container
	s.metrics.startedContainerErrors.WithLabelValues(containerTypeLabel(sa.kind), reason).Inc()
	msg := err.Error()
	s.usernsStartFailed(ps)
	s.recorder.Event(containerRef(pod, c), corev1.EventTypeWarning, "Failed", "Error: "+msg)
	ps.setWaiting(c.Name, podstatus.Waiting{Reason: reason, Message: msg})
	return Requeue{After: retry}
}

// containerConfig resolves the environment and files of a container and builds its CRI config.
func (b *configBuilder) containerConfig(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sa startAction,
	st *runtime.PodStatus, imageRef string) (*runtimeapi.ContainerConfig, error) {
	podIPs := st.IPs
	if pod.Spec.HostNetwork {
		podIPs = b.hostIPs
	}
	var nodeAlloc corev1.ResourceList
	if n, err := b.node(ctx); err == nil {
		nodeAlloc = n.Status.Allocatable
	}
	env, envMap, err := b.containerEnv(ctx, pod, c, podIPs, nodeAlloc)
	if err != nil {
		return nil, err
	}
	mounts, err := b.volumes.Mounts(pod, c, envMap)
	if err != nil {
		return nil, err
	}
	devices, err := b.volumes.Devices(pod, c)
	if err != nil {
		return nil, err
	}
	// The device plugins' devices come first, as with the kubelet: their environment, mounts and devices
	// before the container's own.
	plugged, err := b.devices.RunContainerOptions(ctx, pod, c)
	if err != nil {
		return nil, err
	}
	if plugged != nil {
		env = append(slices.Clip(plugged.Envs), env...)
		mounts = append(slices.Clip(plugged.Mounts), mounts...)
		devices = append(slices.Clip(plugged.Devices), devices...)
	}
	// The image's user, for runAsNonRoot and the user the container runs as (the kubelet's getImageUser).
	imageUID, imageUser, err := podconfig.LookupImageUser(ctx, b.cri, &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image})
	if err != nil {
		return nil, err
	}
	files, err := b.containerFiles(pod, c, podIPs)
	if err != nil {
		return nil, err
	}
	targetID, err := targetContainerID(sa, st)
	if err != nil {
		return nil, err
	}
	opts := b.resourceOptions(ctx)
	opts.ImageUID, opts.ImageUsername = imageUID, imageUser
	opts.SeccompDefault, opts.SeccompProfileRoot = b.seccompDefault, podconfig.SeccompProfileRoot(b.rootDir)
	opts.Env, opts.Mounts, opts.Devices, opts.PodIPs, opts.ImageRef = env, mounts, devices, podIPs, imageRef
	opts.Files, opts.TargetContainerID = files, targetID
	if opts.UserNamespace, err = b.userNamespace(ctx, pod); err != nil {
		return nil, err
	}
	// The CDI devices of the container's ResourceClaims come first, then its device plugins', as the
	// kubelet orders them.
	if opts.CDIDevices, err = b.dra.CDIDevices(pod, c); err != nil {
		return nil, err
	}
	if plugged != nil {
		opts.Annotations = plugged.Annotations
		opts.CDIDevices = append(opts.CDIDevices, plugged.CDIDevices...)
	}
	return podconfig.ContainerConfig(pod, c, sa.kind, sa.restartCount, opts)
}

// resourceOptions are what a container's CRI resources take from the node: the host's settings and the
// node's memory capacity (a Burstable container's oom_score_adj), at creation and on a resize alike.
func (b *configBuilder) resourceOptions(ctx context.Context) podconfig.ContainerOptions {
	opts := podconfig.ContainerOptions{HostResources: b.hostResources}
	if n, err := b.node(ctx); err == nil {
		opts.NodeMemoryCapacity = n.Status.Capacity.Memory().Value()
	}
	return opts
}

// containerEnv is the container's environment (the kubelet's makeEnvironmentVariables), as CRI key-values and
// as a map (for subPathExpr); nodeAlloc is the default of a resourceFieldRef on a resource without a limit.
func (b *configBuilder) containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIPs []string,
	nodeAlloc corev1.ResourceList) ([]*runtimeapi.KeyValue, map[string]string, error) {
	serviceEnv, err := b.serviceEnv(ctx, pod)
	if err != nil {
		return nil, nil, err
	}
	env, _, err := podconfig.MakeEnvironment(ctx, pod, c, podconfig.EnvOptions{
		NodeName: b.nodeName, HostIPs: b.hostIPs, PodIPs: podIPs, NodeAllocatable: nodeAlloc, ServiceEnv: serviceEnv,
		VolumePath: func(volume string) (string, error) { return b.volumes.HostPath(pod, volume) },
	}, b.secrets)
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
func (b *configBuilder) containerFiles(pod *corev1.Pod, c *corev1.Container, podIPs []string) (podconfig.ContainerFiles, error) {
	podDir, err := podconfig.PodDir(b.rootDir, pod.UID)
	if err != nil {
		return podconfig.ContainerFiles{}, err
	}
	hosts, err := podconfig.EnsureEtcHosts(podDir, pod, podIPs, b.sandboxOpts.ClusterDomain)
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
func targetContainerID(sa startAction, st *runtime.PodStatus) (string, error) {
	if sa.target == "" {
		return "", nil
	}
	t := st.FindContainer(sa.target)
	if t == nil {
		return "", fmt.Errorf("unable to find target container %v", sa.target)
	}
	return t.ID, nil
}

// syncProbes tells the probe workers which containers run now.
func (s *Syncer) syncProbes(pod *corev1.Pod, st *runtime.PodStatus) {
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
	// A probe connects to the pod's IP as its status gives it (the kubelet's prober reads status.podIP).
	ips := podrules.SortPodIPs(st.IPs, s.hostIPs)
	if pod.Spec.HostNetwork {
		ips = s.hostIPs
	}
	s.probes.Sync(pod, ips, infos)
}

// probeResults is the probes' view for computePodActions.
func (s *Syncer) probeResults() probeResults { return s.probes }

// setUpVolumes prepares (and refreshes) the pod's volumes. Each failure is a FailedMount event — once
// per distinct message, not on every sync — and the containers wait in ContainerCreating. It returns
// whether every volume is ready, and whether a volume rejected the pod (rejected: its sandbox runs, so it
// is stopped, then the pod is terminated).
func (s *Syncer) setUpVolumes(ctx context.Context, ps *PodState, pod *corev1.Pod) (ready, rejected bool) {
	errs := s.volumes.SetUp(ctx, pod)
	seen := map[string]bool{}
	for _, err := range errs {
		var rej podRejection
		if errors.As(err, &rej) {
			s.Reject(ps, pod, rej.RejectReason(), rej.Error())
			return false, true
		}
		msg := err.Error()
		seen[msg] = true
		if !ps.mountErrors[msg] {
			s.recorder.Event(PodRef(pod), corev1.EventTypeWarning, "FailedMount", msg)
			ctrl.LoggerFrom(ctx).Info("Volume set-up failed", "err", msg)
		}
	}
	ps.mountErrors = seen
	// Ready once every volume was set up: a volume that waits (for its attach, say) reports no error and
	// holds the containers as a failed one does; a refresh that fails later does not stop them.
	return s.volumes.Ready(pod.UID), false
}

// podRejection is a volume set-up failure that rejects the pod (volumes.AttachLimitExceededError): its
// reason is the pod's Failed status reason.
type podRejection interface {
	error
	RejectReason() string
}

// Reject records the kubelet's rejection of the pod (its rejectPod), by admission or by a volume: a Warning
// event with the reason, and a Failed status with only the reason and "Pod was rejected: <message>".
func (s *Syncer) Reject(ps *PodState, pod *corev1.Pod, reason, message string) {
	s.recorder.Event(PodRef(pod), corev1.EventTypeWarning, reason, message)
	ps.outcome = &podstatus.Override{Phase: corev1.PodFailed, Reason: reason, Message: "Pod was rejected: " + message, Rejected: true}
}
