package fake

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RunPodSandbox creates a READY sandbox with a fresh id and pod IP.
func (r *sandboxService) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	if err := r.begin("RunPodSandbox"); err != nil {
		return nil, err
	}
	if err := validateSandboxConfig(req.GetConfig()); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.handlers, req.GetRuntimeHandler()) {
		return nil, status.Errorf(codes.Unknown, "failed to get sandbox runtime: no runtime for %q is configured", req.GetRuntimeHandler())
	}
	if err := r.reserveSandboxNameLocked(req.GetConfig().GetMetadata()); err != nil {
		return nil, err
	}
	s := &sandbox{
		id:        newID(),
		seq:       r.nextSeq(),
		config:    proto.CloneOf(req.GetConfig()),
		handler:   req.GetRuntimeHandler(),
		state:     runtimeapi.PodSandboxState_SANDBOX_READY,
		createdAt: r.now(),
	}
	s.ip = hostIP
	if !s.hostNetwork() {
		s.ip = r.nextIP()
	}
	r.sandboxes[s.id] = s
	r.publishLocked(s.id, s.id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	r.publishLocked(s.id, s.id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: s.id}, nil
}

func validateSandboxConfig(cfg *runtimeapi.PodSandboxConfig) error {
	if cfg == nil {
		return invalidArg("sandbox config must not be nil")
	}
	md := cfg.GetMetadata()
	if md == nil {
		return invalidArg("sandbox config must include metadata")
	}
	if md.GetName() == "" {
		return invalidArg("sandbox metadata must include a name")
	}
	return nil
}

func sandboxName(md *runtimeapi.PodSandboxMetadata) string {
	return fmt.Sprintf("%s_%s_%s_%d", md.GetName(), md.GetNamespace(), md.GetUid(), md.GetAttempt())
}

func (r *sandboxService) reserveSandboxNameLocked(md *runtimeapi.PodSandboxMetadata) error {
	name := sandboxName(md)
	for _, s := range r.sandboxes {
		if sandboxName(s.config.GetMetadata()) == name {
			return status.Errorf(codes.AlreadyExists, "failed to reserve sandbox name %q: name %q is reserved for %q", name, name, s.id)
		}
	}
	return nil
}

// StopPodSandbox kills the sandbox's running containers and makes it NOTREADY.
func (r *sandboxService) StopPodSandbox(_ context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	if err := r.begin("StopPodSandbox"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.sandboxLocked(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	r.stopSandboxLocked(s)
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (r *state) stopSandboxLocked(s *sandbox) {
	for _, c := range r.containersOfLocked(s.id) {
		if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			r.exitLocked(c, exitCodeSIGKILL, "", "")
		}
	}
	if s.state == runtimeapi.PodSandboxState_SANDBOX_READY {
		s.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		r.publishLocked(s.id, s.id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	}
}

// RemovePodSandbox stops and removes the sandbox and all its containers.
// Removing a missing sandbox succeeds.
func (r *sandboxService) RemovePodSandbox(_ context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	if err := r.begin("RemovePodSandbox"); err != nil {
		return nil, err
	}
	if req.GetPodSandboxId() == "" {
		return nil, invalidArg("pod sandbox id must not be empty")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sandboxes[req.GetPodSandboxId()]
	if !ok {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	r.stopSandboxLocked(s)
	for _, c := range r.containersOfLocked(s.id) {
		r.removeContainerLocked(c)
	}
	r.publishLocked(s.id, s.id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	delete(r.sandboxes, s.id)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// PodSandboxStatus returns the status of a sandbox, NotFound if missing.
func (r *sandboxService) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	if err := r.begin("PodSandboxStatus"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.sandboxLocked(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.PodSandboxStatusResponse{
		Status:             s.status(),
		ContainersStatuses: r.containerStatusesLocked(s.id),
		Timestamp:          r.now(),
	}
	if req.GetVerbose() {
		resp.Info = map[string]string{"info": fmt.Sprintf(`{"runtimeHandler":%q,"ip":%q}`, s.handler, s.ip)}
	}
	return resp, nil
}

// ListPodSandbox lists sandboxes matching the filter, in creation order.
func (r *sandboxService) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	if err := r.begin("ListPodSandbox"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return &runtimeapi.ListPodSandboxResponse{Items: r.listSandboxesLocked(req.GetFilter())}, nil
}

// StreamPodSandboxes sends the ListPodSandbox result as one message.
func (r *sandboxService) StreamPodSandboxes(req *runtimeapi.StreamPodSandboxesRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxesResponse]) error {
	if err := r.begin("StreamPodSandboxes"); err != nil {
		return err
	}
	r.mu.Lock()
	items := r.listSandboxesLocked(req.GetFilter())
	r.mu.Unlock()
	return stream.Send(&runtimeapi.StreamPodSandboxesResponse{PodSandboxes: items})
}

// UpdatePodSandboxResources accepts updates for existing sandboxes.
func (r *sandboxService) UpdatePodSandboxResources(_ context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	if err := r.begin("UpdatePodSandboxResources"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.sandboxLocked(req.GetPodSandboxId()); err != nil {
		return nil, err
	}
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}

// PortForward returns a fake streaming URL for a READY sandbox.
func (r *sandboxService) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	if err := r.begin("PortForward"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.sandboxLocked(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	if s.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %q is not ready", s.id)
	}
	return &runtimeapi.PortForwardResponse{Url: streamURL("portforward")}, nil
}
