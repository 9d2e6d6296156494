package probes

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// closedPort returns a local port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

// openPort returns a local port with a listener, closed when the test ends.
func openPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

func TestTCPProber(t *testing.T) {
	open, closed := openPort(t), closedPort(t)
	tests := []struct {
		name        string
		port        int
		wantVerdict verdict
		wantOutput  string
	}{
		{"listening", open, verdictSuccess, ""},
		{"closed", closed, verdictFailure, "dial tcp 127.0.0.1:" + strconv.Itoa(closed) + ": connect: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := tcpProber{}.probe(context.Background(), "127.0.0.1", tt.port, time.Second)
			if out.verdict != tt.wantVerdict || !strings.Contains(out.output, tt.wantOutput) {
				t.Errorf("probe = %v %q, want %v %q", out.verdict, out.output, tt.wantVerdict, tt.wantOutput)
			}
		})
	}
}
