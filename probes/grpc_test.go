package probes

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// grpcServer serves the health protocol on 127.0.0.1 (unless withHealth is false) and returns its port.
func grpcServer(t *testing.T, withHealth bool) (int, *health.Server) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	if withHealth {
		healthpb.RegisterHealthServer(srv, hs)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().(*net.TCPAddr).Port, hs
}

func TestGRPCProber(t *testing.T) {
	port, hs := grpcServer(t, true)
	hs.SetServingStatus("up", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	bare, _ := grpcServer(t, false)
	closed := closedPort(t)
	tests := []struct {
		name        string
		port        int
		service     string
		timeout     time.Duration
		wantVerdict verdict
		wantOutput  string
	}{
		{"server serving", port, "", time.Second, verdictSuccess, "service healthy"},
		{"service serving", port, "up", time.Second, verdictSuccess, "service healthy"},
		{"service not serving", port, "down", time.Second, verdictFailure, `service unhealthy (responded with "NOT_SERVING")`},
		{"unknown service", port, "other", time.Second, verdictFailure, "error: health rpc probe failed: rpc error: code = NotFound"},
		{"no health service", bare, "", time.Second, verdictFailure, "error: this server does not implement the grpc health protocol (grpc.health.v1.Health)"},
		{"nothing listening", closed, "", 200 * time.Millisecond, verdictFailure, "timeout: failed to connect service \"127.0.0.1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := grpcProber{}.probe(context.Background(), "127.0.0.1", tt.service, tt.port, tt.timeout)
			if out.verdict != tt.wantVerdict || !strings.Contains(out.output, tt.wantOutput) {
				t.Errorf("probe = %v %q, want %v %q", out.verdict, out.output, tt.wantVerdict, tt.wantOutput)
			}
		})
	}
}
