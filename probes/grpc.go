package probes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// grpcProber runs grpc probes: the standard health protocol's Check, over plaintext.
type grpcProber struct{}

// probe connects to host:port and asks for service's health within timeout: SERVING is success, anything
// else (including no connection in time) a failure with the kubelet's messages.
func (grpcProber) probe(ctx context.Context, host, service string, port int, timeout time.Duration) outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(userAgent),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dial(ctx, "tcp", addr, 0)
		}))
	if err != nil {
		return failure(fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err))
	}
	defer func() { _ = conn.Close() }()
	if err := waitReady(ctx, conn); err != nil {
		return failure(connectFailure(addr, timeout, err))
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return failure(checkFailure(err, timeout))
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return failure(fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()))
	}
	return success("service healthy")
}

// waitReady connects and waits until the connection is ready or ctx ends, retrying refused connections
// as the kubelet's blocking dial does.
func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	conn.Connect()
	for state := conn.GetState(); state != connectivity.Ready; state = conn.GetState() {
		if !conn.WaitForStateChange(ctx, state) {
			return ctx.Err()
		}
	}
	return nil
}

// connectFailure is the message for a connection that did not become ready.
func connectFailure(addr string, timeout time.Duration, err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("timeout: failed to connect service %q within %v: %+v", addr, timeout, err)
	}
	return fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err)
}

// checkFailure is the message for a failed Check call.
func checkFailure(err error, timeout time.Duration) string {
	switch st, _ := status.FromError(err); st.Code() {
	case codes.Unimplemented:
		return "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): " + st.Message()
	case codes.DeadlineExceeded:
		return fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)
	}
	return fmt.Sprintf("error: health rpc probe failed: %+v", err)
}
