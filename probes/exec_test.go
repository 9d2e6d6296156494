package probes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	noderuntime "github.com/nodelet/nodelet/runtime"
)

// execFunc adapts a function to Execer.
type execFunc func(ctx context.Context, id string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error)

func (f execFunc) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	return f(ctx, id, cmd, timeout)
}

func TestExecProber(t *testing.T) {
	timedOut := `command timed out: "sh -c sleep 9" timed out after 2s`
	tests := []struct {
		name        string
		resp        *runtimeapi.ExecSyncResponse
		err         error
		wantVerdict verdict
		wantOutput  string
	}{
		{"exit 0", &runtimeapi.ExecSyncResponse{Stdout: []byte("ok\n")}, nil, verdictSuccess, "ok\n"},
		{"exit 1", &runtimeapi.ExecSyncResponse{ExitCode: 1, Stdout: []byte("out "), Stderr: []byte("err")}, nil, verdictFailure, "out err"},
		{"exit 137", &runtimeapi.ExecSyncResponse{ExitCode: 137}, nil, verdictFailure, ""},
		{"output capped", &runtimeapi.ExecSyncResponse{ExitCode: 1, Stdout: []byte(strings.Repeat("x", 20<<10))}, nil, verdictFailure, strings.Repeat("x", 10<<10)},
		{"runtime timeout", nil, status.Error(codes.DeadlineExceeded, "timeout 2s exceeded"), verdictFailure, timedOut},
		{"client timeout", nil, fmt.Errorf("ExecSync: %w: %w", noderuntime.ErrDeadlineExceeded, errors.New("x")), verdictFailure, timedOut},
		{"context deadline", nil, context.DeadlineExceeded, verdictFailure, timedOut},
		{"container gone", nil, noderuntime.ErrNotFound, verdictUnknown, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotTimeout time.Duration
			p := execProber{exec: execFunc(func(_ context.Context, id string, _ []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
				gotTimeout = timeout
				return tt.resp, tt.err
			})}
			out := p.probe(context.Background(), "c1", []string{"sh", "-c", "sleep 9"}, 2*time.Second)
			if out.verdict != tt.wantVerdict || out.output != tt.wantOutput {
				t.Errorf("probe = %v %q, want %v %q", out.verdict, out.output, tt.wantVerdict, tt.wantOutput)
			}
			if (out.err != nil) != (tt.wantVerdict == verdictUnknown) {
				t.Errorf("err = %v", out.err)
			}
			if gotTimeout != 2*time.Second {
				t.Errorf("ExecSync timeout = %v, want 2s", gotTimeout)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "EMPTY": ""}
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "1"},
		{"x$(A)y$(A)", "x1y1"},
		{"$(EMPTY)", ""},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$", "$"},
		{"$", "$"},
		{"$x", "$x"},
		{"$(A", "$(A"},
		{"$()", "$()"},
	}
	for _, tt := range tests {
		if got := expand(tt.in, vars); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
