package fake

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CreateContainer creates a CREATED container in a READY sandbox from an
// image present in the store.
func (r *containerService) CreateContainer(_ context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	if err := r.begin("CreateContainer"); err != nil {
		return nil, err
	}
	if err := validateContainerConfig(req.GetConfig()); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.newContainerLocked(req)
	if err != nil {
		return nil, err
	}
	r.containers[c.id] = c
	r.publishLocked(c.sandboxID, c.id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return &runtimeapi.CreateContainerResponse{ContainerId: c.id}, nil
}

func validateContainerConfig(cfg *runtimeapi.ContainerConfig) error {
	switch {
	case cfg == nil:
		return invalidArg("container config must not be nil")
	case cfg.GetMetadata() == nil || cfg.GetMetadata().GetName() == "":
		return invalidArg("container config must include metadata with a name")
	case cfg.GetImage().GetImage() == "":
		return invalidArg("container config must include an image")
	}
	return nil
}

func (r *containerService) newContainerLocked(req *runtimeapi.CreateContainerRequest) (*container, error) {
	cfg := req.GetConfig()
	s, err := r.sandboxLocked(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	if s.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox container %q is not running", s.id)
	}
	img := r.findImageLocked(cfg.GetImage().GetImage())
	if img == nil {
		return nil, status.Errorf(codes.NotFound, "failed to get image %q: image not found", cfg.GetImage().GetImage())
	}
	if err := r.reserveContainerNameLocked(s, cfg.GetMetadata()); err != nil {
		return nil, err
	}
	b, ok := Behaviour{}, false
	if r.behaviourOf != nil {
		b, ok = r.behaviourOf(s.config, cfg)
	}
	if !ok {
		b = r.behaviours[cfg.GetMetadata().GetName()]
	}
	if b.CreateError != "" {
		return nil, status.Error(codes.Unknown, b.CreateError)
	}
	c := &container{
		id:        newID(),
		sandboxID: s.id,
		seq:       r.nextSeq(),
		config:    proto.CloneOf(cfg),
		imageName: img.name(cfg.GetImage().GetImage()),
		imageRef:  img.ref(),
		imageID:   img.id,
		state:     runtimeapi.ContainerState_CONTAINER_CREATED,
		createdAt: r.now(),
		logPath:   logPath(s.config.GetLogDirectory(), cfg.GetLogPath()),
		behaviour: b,
		exited:    make(chan struct{}),
	}
	if res := cfg.GetLinux().GetResources(); res != nil {
		c.resources = &runtimeapi.ContainerResources{Linux: proto.CloneOf(res)}
	}
	return c, nil
}

func logPath(dir, path string) string {
	if dir == "" || path == "" {
		return ""
	}
	return filepath.Join(dir, path)
}

func (r *containerService) reserveContainerNameLocked(s *sandbox, md *runtimeapi.ContainerMetadata) error {
	for _, c := range r.containersOfLocked(s.id) {
		other := c.config.GetMetadata()
		if other.GetName() == md.GetName() && other.GetAttempt() == md.GetAttempt() {
			name := fmt.Sprintf("%s_%s_%d", md.GetName(), sandboxName(s.config.GetMetadata()), md.GetAttempt())
			return status.Errorf(codes.AlreadyExists, "failed to reserve container name %q: name %q is reserved for %q", name, name, c.id)
		}
	}
	return nil
}

// StartContainer starts a CREATED container in a READY sandbox.
func (r *containerService) StartContainer(_ context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	if err := r.begin("StartContainer"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.containerLocked(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is in %s state", c.id, c.state)
	}
	if s := r.sandboxes[c.sandboxID]; s == nil || s.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox container %q is not running", c.sandboxID)
	}
	if msg := c.behaviour.StartError; msg != "" {
		r.exitLocked(c, exitCodeStartError, "StartError", msg)
		return nil, status.Error(codes.Unknown, msg)
	}
	c.state = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.startedAt = r.now()
	if err := writeLogs(c.logPath, c.behaviour.Logs, r.clock.Now()); err != nil {
		return nil, status.Errorf(codes.Internal, "write the container's log: %v", err)
	}
	r.publishLocked(c.sandboxID, c.id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	if d := c.behaviour.ExitAfter; d > 0 {
		id := c.id
		c.cancelExit = r.afterFunc(d, func() { r.scriptedExit(id) })
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

// scriptedExit ends a container whose Behaviour.ExitAfter elapsed.
func (r *containerService) scriptedExit(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok || c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return
	}
	r.exitLocked(c, c.behaviour.ExitCode, c.behaviour.Reason, "")
}

// StopContainer stops a running container: SIGTERM (143) at once, or SIGKILL
// (137) for timeout <= 0 or, with IgnoreSIGTERM, once the timeout elapsed on
// the clock. Stopping a container that is not running is a no-op.
func (r *containerService) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	if err := r.begin("StopContainer"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	c, err := r.containerLocked(req.GetContainerId())
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.Unlock()
		return &runtimeapi.StopContainerResponse{}, nil
	}
	switch {
	case req.GetTimeout() <= 0:
		r.exitLocked(c, exitCodeSIGKILL, "", "")
	case !c.behaviour.IgnoreSIGTERM:
		r.exitLocked(c, exitCodeSIGTERM, "", "")
	default:
		exited := c.exited
		r.mu.Unlock()
		return r.killAfter(ctx, c, exited, time.Duration(req.GetTimeout())*time.Second)
	}
	r.mu.Unlock()
	return &runtimeapi.StopContainerResponse{}, nil
}

// killAfter waits, without holding r.mu, until the container exits or d has
// elapsed on the clock, then kills it.
func (r *containerService) killAfter(ctx context.Context, c *container, exited <-chan struct{}, d time.Duration) (*runtimeapi.StopContainerResponse, error) {
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C():
		r.mu.Lock()
		if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			r.exitLocked(c, exitCodeSIGKILL, "", "")
		}
		r.mu.Unlock()
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-r.done:
		return nil, status.Error(codes.Unavailable, "runtime is shutting down")
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer force-stops and removes a container; a missing one is fine.
func (r *containerService) RemoveContainer(_ context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	if err := r.begin("RemoveContainer"); err != nil {
		return nil, err
	}
	if req.GetContainerId() == "" {
		return nil, invalidArg("container id must not be empty")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.containers[req.GetContainerId()]; ok {
		r.removeContainerLocked(c)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (r *state) removeContainerLocked(c *container) {
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.exitLocked(c, exitCodeSIGKILL, "", "")
	}
	c.cancelTimer()
	delete(r.containers, c.id)
	r.publishLocked(c.sandboxID, c.id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
}

// ContainerStatus returns the status of a container, NotFound if missing.
func (r *containerService) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	if err := r.begin("ContainerStatus"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.containerLocked(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.ContainerStatusResponse{Status: c.status()}
	if req.GetVerbose() {
		resp.Info = map[string]string{"info": fmt.Sprintf(`{"sandboxID":%q}`, c.sandboxID)}
	}
	return resp, nil
}

// ListContainers lists containers matching the filter, in creation order.
func (r *containerService) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	if err := r.begin("ListContainers"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return &runtimeapi.ListContainersResponse{Containers: r.listContainersLocked(req.GetFilter())}, nil
}

// StreamContainers sends the ListContainers result as one message.
func (r *containerService) StreamContainers(req *runtimeapi.StreamContainersRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamContainersResponse]) error {
	if err := r.begin("StreamContainers"); err != nil {
		return err
	}
	r.mu.Lock()
	items := r.listContainersLocked(req.GetFilter())
	r.mu.Unlock()
	return stream.Send(&runtimeapi.StreamContainersResponse{Containers: items})
}

// UpdateContainerResources records the resources in the container status.
func (r *containerService) UpdateContainerResources(_ context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	if err := r.begin("UpdateContainerResources"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.containerLocked(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if c.state == runtimeapi.ContainerState_CONTAINER_EXITED {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is in %s state", c.id, c.state)
	}
	c.resources = &runtimeapi.ContainerResources{
		Linux:   proto.CloneOf(req.GetLinux()),
		Windows: proto.CloneOf(req.GetWindows()),
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// ReopenContainerLog succeeds for running containers.
func (r *containerService) ReopenContainerLog(_ context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	if err := r.begin("ReopenContainerLog"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.runningContainerLocked(req.GetContainerId()); err != nil {
		return nil, err
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

// ExecSync returns the result scripted with SetExecResult for the
// container's name; the container must be running.
func (r *containerService) ExecSync(_ context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if err := r.begin("ExecSync"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.runningContainerLocked(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if res, ok := r.execResults[c.config.GetMetadata().GetName()]; ok {
		return proto.CloneOf(res), nil
	}
	stdout, stderr, code := c.behaviour.run(req.GetCmd())
	return &runtimeapi.ExecSyncResponse{Stdout: []byte(stdout), Stderr: []byte(stderr), ExitCode: code}, nil
}

// Exec returns a fake streaming URL for a running container.
func (r *containerService) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if err := r.begin("Exec"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.runningContainerLocked(req.GetContainerId()); err != nil {
		return nil, err
	}
	if r.streamer != nil {
		return r.streamer.GetExec(req)
	}
	return &runtimeapi.ExecResponse{Url: streamURL("exec")}, nil
}

// Attach returns a fake streaming URL for a running container.
func (r *containerService) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if err := r.begin("Attach"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.runningContainerLocked(req.GetContainerId()); err != nil {
		return nil, err
	}
	if r.streamer != nil {
		return r.streamer.GetAttach(req)
	}
	return &runtimeapi.AttachResponse{Url: streamURL("attach")}, nil
}

func streamURL(kind string) string {
	return "http://127.0.0.1:10010/" + kind + "/" + newID()[:8]
}

// CheckpointContainer is not supported.
func (r *containerService) CheckpointContainer(context.Context, *runtimeapi.CheckpointContainerRequest) (*runtimeapi.CheckpointContainerResponse, error) {
	if err := r.begin("CheckpointContainer"); err != nil {
		return nil, err
	}
	return nil, status.Error(codes.Unimplemented, "method CheckpointContainer not implemented")
}

// CheckpointPod is not supported.
func (r *containerService) CheckpointPod(context.Context, *runtimeapi.CheckpointPodRequest) (*runtimeapi.CheckpointPodResponse, error) {
	if err := r.begin("CheckpointPod"); err != nil {
		return nil, err
	}
	return nil, status.Error(codes.Unimplemented, "method CheckpointPod not implemented")
}

// RestorePod is not supported.
func (r *containerService) RestorePod(context.Context, *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	if err := r.begin("RestorePod"); err != nil {
		return nil, err
	}
	return nil, status.Error(codes.Unimplemented, "method RestorePod not implemented")
}
