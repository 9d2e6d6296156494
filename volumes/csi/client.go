package csi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Timeout bounds each call to a driver's node service, as the kubelet's csiTimeout.
const Timeout = 2 * time.Minute

// Client is the node service of one CSI driver, over its unix socket. Each call connects anew, as the
// kubelet's client does (a driver restarting between two calls is no matter), and is bounded by
// Timeout. Errors from the driver are its gRPC status errors, as they are; NodeStageVolume,
// NodePublishVolume and NodeExpandVolume return an *UncertainError for one that leaves the operation
// possibly still in progress (IsUncertain).
type Client struct {
	driver   string
	endpoint string
	timeout  time.Duration

	mu   sync.Mutex
	caps map[csipb.NodeServiceCapability_RPC_Type]bool
}

// NewClient returns the client of driver's node service at endpoint (a socket path, or unix://path).
func NewClient(driver, endpoint string) *Client {
	return &Client{driver: driver, endpoint: endpoint, timeout: Timeout}
}

// UncertainError is a failed call whose operation may still be going on in the driver (a timeout, a
// cancelled call, a broken connection, ResourceExhausted or Aborted): the volume must be treated as
// possibly mounted, and unmounted (or the call retried) before it is forgotten.
type UncertainError struct{ Err error }

// Error is the driver's error, as it is.
func (e *UncertainError) Error() string { return e.Err.Error() }

// Unwrap returns the driver's error (a gRPC status error, or the connection's).
func (e *UncertainError) Unwrap() error { return e.Err }

// IsUncertain says whether err leaves the operation possibly in progress.
func IsUncertain(err error) bool {
	_, ok := errors.AsType[*UncertainError](err)
	return ok
}

// IsFinal says whether a failed call is over for sure: the driver answered with an error that means the
// operation did not start or failed. Timeouts, cancellations, Unavailable, ResourceExhausted, Aborted and
// errors that are no gRPC status (the call may never have reached the driver) are not final.
func IsFinal(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return false
	}
	return true
}

// uncertain marks a non-final error as an *UncertainError.
func uncertain(err error) error {
	if err == nil || IsFinal(err) {
		return err
	}
	return &UncertainError{Err: err}
}

// call runs fn against the driver's node service on a new connection, within Timeout.
func (c *Client) call(ctx context.Context, fn func(context.Context, csipb.NodeClient) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	conn, err := dialUnix(c.endpoint)
	if err != nil {
		return fmt.Errorf("connect to CSI driver %s at %s: %w", c.driver, c.endpoint, err)
	}
	defer func() { _ = conn.Close() }()
	return fn(ctx, csipb.NewNodeClient(conn))
}

// dialUnix is a (lazy) connection to the gRPC server on the unix socket at endpoint.
func dialUnix(endpoint string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	return grpc.NewClient("unix://"+strings.TrimPrefix(endpoint, "unix://"), opts...)
}

// NodeGetInfo asks the driver for this node's ID, volume limit and topology.
func (c *Client) NodeGetInfo(ctx context.Context) (*csipb.NodeGetInfoResponse, error) {
	var resp *csipb.NodeGetInfoResponse
	err := c.call(ctx, func(ctx context.Context, nc csipb.NodeClient) (err error) {
		resp, err = nc.NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{})
		return err
	})
	return resp, err
}

// NodeCapabilities lists the node service's capabilities. The first answer is kept for the life of the
// client (the driver's registration).
func (c *Client) NodeCapabilities(ctx context.Context) (map[csipb.NodeServiceCapability_RPC_Type]bool, error) {
	c.mu.Lock()
	caps := c.caps
	c.mu.Unlock()
	if caps != nil {
		return caps, nil
	}
	var resp *csipb.NodeGetCapabilitiesResponse
	err := c.call(ctx, func(ctx context.Context, nc csipb.NodeClient) (err error) {
		resp, err = nc.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	caps = map[csipb.NodeServiceCapability_RPC_Type]bool{}
	for _, capability := range resp.GetCapabilities() {
		if rpc := capability.GetRpc(); rpc != nil {
			caps[rpc.GetType()] = true
		}
	}
	c.mu.Lock()
	c.caps = caps
	c.mu.Unlock()
	return caps, nil
}

// NodeStageVolume stages a volume at req.StagingTargetPath. A non-final error is an *UncertainError.
func (c *Client) NodeStageVolume(ctx context.Context, req *csipb.NodeStageVolumeRequest) error {
	switch {
	case req.GetVolumeId() == "":
		return errors.New("missing volume id")
	case req.GetStagingTargetPath() == "":
		return errors.New("missing staging target path")
	}
	return uncertain(c.call(ctx, func(ctx context.Context, nc csipb.NodeClient) error {
		_, err := nc.NodeStageVolume(ctx, req)
		return err
	}))
}

// NodeUnstageVolume unstages the volume staged at stagingPath.
func (c *Client) NodeUnstageVolume(ctx context.Context, volumeID, stagingPath string) error {
	switch {
	case volumeID == "":
		return errors.New("missing volume id")
	case stagingPath == "":
		return errors.New("missing staging target path")
	}
	return c.call(ctx, func(ctx context.Context, nc csipb.NodeClient) error {
		_, err := nc.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: volumeID, StagingTargetPath: stagingPath})
		return err
	})
}

// NodePublishVolume publishes a volume at req.TargetPath. A non-final error is an *UncertainError.
func (c *Client) NodePublishVolume(ctx context.Context, req *csipb.NodePublishVolumeRequest) error {
	switch {
	case req.GetVolumeId() == "":
		return errors.New("missing volume id")
	case req.GetTargetPath() == "":
		return errors.New("missing target path")
	}
	return uncertain(c.call(ctx, func(ctx context.Context, nc csipb.NodeClient) error {
		_, err := nc.NodePublishVolume(ctx, req)
		return err
	}))
}

// NodeUnpublishVolume unpublishes the volume published at targetPath.
func (c *Client) NodeUnpublishVolume(ctx context.Context, volumeID, targetPath string) error {
	switch {
	case volumeID == "":
		return errors.New("missing volume id")
	case targetPath == "":
		return errors.New("missing target path")
	}
	return c.call(ctx, func(ctx context.Context, nc csipb.NodeClient) error {
		_, err := nc.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: volumeID, TargetPath: targetPath})
		return err
	})
}

// NodeGetVolumeStats measures the volume published (or staged) at volumePath. A response without usage
// is an error, as the kubelet has it.
func (c *Client) NodeGetVolumeStats(ctx context.Context, volumeID, volumePath string) (*csipb.NodeGetVolumeStatsResponse, error) {
	switch {
	case volumeID == "":
		return nil, errors.New("missing volume id")
	case volumePath == "":
		return nil, errors.New("missing target path")
	}
	var resp *csipb.NodeGetVolumeStatsResponse
	err := c.call(ctx, func(ctx context.Context, nc csipb.NodeClient) (err error) {
		resp, err = nc.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: volumeID, VolumePath: volumePath})
		return err
	})
	if err != nil {
		return nil, err
	}
	if resp.GetUsage() == nil {
		return nil, errors.New("failed to get usage from response. usage is nil")
	}
	return resp, nil
}

// NodeExpandVolume grows the filesystem of the volume at req.VolumePath. A non-final error is an
// *UncertainError.
func (c *Client) NodeExpandVolume(ctx context.Context, req *csipb.NodeExpandVolumeRequest) error {
	switch {
	case req.GetVolumeId() == "":
		return errors.New("missing volume id")
	case req.GetVolumePath() == "":
		return errors.New("missing volume path")
	case req.GetCapacityRange().GetRequiredBytes() < 0:
		return errors.New("size can not be less than 0")
	}
	return uncertain(c.call(ctx, func(ctx context.Context, nc csipb.NodeClient) error {
		_, err := nc.NodeExpandVolume(ctx, req)
		return err
	}))
}
