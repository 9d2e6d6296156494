package runtime

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Version returns the runtime's name and versions; every field must be set.
func (c *Client) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.runtime.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
	if err != nil {
		return nil, MapError("Version", err)
	}
	if resp.Version == "" || resp.RuntimeName == "" || resp.RuntimeApiVersion == "" || resp.RuntimeVersion == "" {
		return nil, invalidResponse("Version", "not all fields are set in %v", resp)
	}
	return resp, nil
}

// Status returns the runtime's conditions (RuntimeReady, NetworkReady).
func (c *Client) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.runtime.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
	if err != nil {
		return nil, MapError("Status", err)
	}
	if resp.Status == nil {
		return nil, invalidResponse("Status", "no status in the response")
	}
	return resp, nil
}

// RunPodSandbox creates and starts a sandbox and returns its ID.
func (c *Client) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: handler})
	if err != nil {
		return "", MapError("RunPodSandbox", err)
	}
	if resp.PodSandboxId == "" {
		return "", invalidResponse("RunPodSandbox", "no sandbox ID for %s", sandboxName(config))
	}
	return resp.PodSandboxId, nil
}

func sandboxName(config *runtimeapi.PodSandboxConfig) string {
	if config.GetMetadata() == nil {
		return "<no metadata>"
	}
	return config.Metadata.Namespace + "/" + config.Metadata.Name
}

// StopPodSandbox stops a sandbox's containers and tears down its network.
func (c *Client) StopPodSandbox(ctx context.Context, id string) error {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	_, err := c.runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	return MapError("StopPodSandbox", err)
}

// RemovePodSandbox removes a sandbox and its containers.
func (c *Client) RemovePodSandbox(ctx context.Context, id string) error {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	_, err := c.runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	return MapError("RemovePodSandbox", err)
}

// PodSandboxStatus returns a sandbox's status.
func (c *Client) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: verbose})
	if err != nil {
		return nil, MapError("PodSandboxStatus", err)
	}
	s := resp.Status
	if s == nil || s.Id == "" || s.Metadata == nil || s.CreatedAt == 0 {
		return nil, invalidResponse("PodSandboxStatus", "incomplete status for sandbox %s: %v", id, s)
	}
	return resp, nil
}

// ListPodSandbox lists sandboxes matching filter (nil: all).
func (c *Client) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	if err != nil {
		return nil, MapError("ListPodSandbox", err)
	}
	for _, s := range resp.Items {
		if s.Id == "" || s.Metadata == nil {
			return nil, invalidResponse("ListPodSandbox", "sandbox without ID or metadata: %v", s)
		}
	}
	return resp.Items, nil
}

// CreateContainer creates a container in a sandbox and returns its ID.
func (c *Client) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sandboxID, Config: config, SandboxConfig: sandboxConfig,
	})
	if err != nil {
		return "", MapError("CreateContainer", err)
	}
	if resp.ContainerId == "" {
		return "", invalidResponse("CreateContainer", "no container ID in sandbox %s", sandboxID)
	}
	return resp.ContainerId, nil
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	_, err := c.runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	return MapError("StartContainer", err)
}

// StopContainer sends SIGTERM (or the image's stop signal) and SIGKILL after timeout seconds.
func (c *Client) StopContainer(ctx context.Context, id string, timeout int64) error {
	ctx, cancel := c.withTimeout(ctx, time.Duration(timeout)*time.Second)
	defer cancel()
	_, err := c.runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: timeout})
	return MapError("StopContainer", err)
}

// RemoveContainer removes a container (force-stopping it if it runs).
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	_, err := c.runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	return MapError("RemoveContainer", err)
}

// ListContainers lists containers matching filter (nil: all).
func (c *Client) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	if err != nil {
		return nil, MapError("ListContainers", err)
	}
	for _, ctr := range resp.Containers {
		if ctr.Id == "" || ctr.Metadata == nil || ctr.PodSandboxId == "" {
			return nil, invalidResponse("ListContainers", "container without ID, metadata or sandbox: %v", ctr)
		}
	}
	return resp.Containers, nil
}

// ContainerStatus returns a container's status.
func (c *Client) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: verbose})
	if err != nil {
		return nil, MapError("ContainerStatus", err)
	}
	s := resp.Status
	if s == nil || s.Id == "" || s.Metadata == nil || s.Image == nil || s.CreatedAt == 0 {
		return nil, invalidResponse("ContainerStatus", "incomplete status for container %s: %v", id, s)
	}
	return resp, nil
}

// UpdateContainerResources changes a running container's resources.
func (c *Client) UpdateContainerResources(ctx context.Context, id string, linux *runtimeapi.LinuxContainerResources) error {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	_, err := c.runtime.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: linux})
	return MapError("UpdateContainerResources", err)
}

// ReopenContainerLog asks the runtime to reopen a container's log file (after a rotation).
func (c *Client) ReopenContainerLog(ctx context.Context, id string) error {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	_, err := c.runtime.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
	return MapError("ReopenContainerLog", err)
}

// ExecSync runs cmd in a container and waits for it, at most timeout (0: no limit but the RPC timeout).
func (c *Client) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	ctx, cancel := c.withTimeout(ctx, timeout)
	defer cancel()
	resp, err := c.runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{
		ContainerId: id, Cmd: cmd, Timeout: int64(timeout.Seconds()),
	})
	if err != nil {
		return nil, MapError("ExecSync", err)
	}
	return resp, nil
}

// Exec prepares a streaming exec and returns the runtime's streaming URL.
func (c *Client) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (string, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.runtime.Exec(ctx, req)
	if err != nil {
		return "", MapError("Exec", err)
	}
	if resp.Url == "" {
		return "", invalidResponse("Exec", "no streaming URL")
	}
	return resp.Url, nil
}

// Attach prepares a streaming attach and returns the runtime's streaming URL.
func (c *Client) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (string, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.runtime.Attach(ctx, req)
	if err != nil {
		return "", MapError("Attach", err)
	}
	if resp.Url == "" {
		return "", invalidResponse("Attach", "no streaming URL")
	}
	return resp.Url, nil
}

// PortForward prepares a port-forward and returns the runtime's streaming URL.
func (c *Client) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (string, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.runtime.PortForward(ctx, req)
	if err != nil {
		return "", MapError("PortForward", err)
	}
	if resp.Url == "" {
		return "", invalidResponse("PortForward", "no streaming URL")
	}
	return resp.Url, nil
}

// ListContainerStats returns resource usage of the containers matching filter.
func (c *Client) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.runtime.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
	if err != nil {
		return nil, MapError("ListContainerStats", err)
	}
	return resp.Stats, nil
}

// ListPodSandboxStats returns resource usage of the sandboxes matching filter.
func (c *Client) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.runtime.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: filter})
	if err != nil {
		return nil, MapError("ListPodSandboxStats", err)
	}
	return resp.Stats, nil
}

// GetContainerEvents subscribes to the runtime's container events; the stream ends with ctx.
// Runtimes without events answer ErrUnimplemented (on the first Recv for some runtimes).
func (c *Client) GetContainerEvents(ctx context.Context) (runtimeapi.RuntimeService_GetContainerEventsClient, error) {
	stream, err := c.runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return nil, MapError("GetContainerEvents", err)
	}
	return stream, nil
}

// RuntimeConfig returns the runtime's configuration (cgroup driver); ErrUnimplemented on older runtimes.
func (c *Client) RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	ctx, cancel := c.withTimeout(ctx, 0)
	defer cancel()
	resp, err := c.runtime.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	if err != nil {
		return nil, MapError("RuntimeConfig", err)
	}
	return resp, nil
}
