package probes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	noderuntime "github.com/nodelet/nodelet/runtime"
)

// maxOutput caps the output of exec and HTTP probes kept for events, as the kubelet does (10 KiB).
const maxOutput = 10 << 10

// execProber runs exec probes through the runtime's ExecSync.
type execProber struct {
	exec Execer
}

// probe runs cmd in the container: exit code 0 is success, any other a failure with the command's
// output (stdout then stderr), a timeout a failure; any other error means the probe could not run.
func (p execProber) probe(ctx context.Context, containerID string, cmd []string, timeout time.Duration) outcome {
	resp, err := p.exec.ExecSync(ctx, containerID, cmd, timeout)
	if err != nil {
		if isTimeout(err) {
			return failure(fmt.Sprintf("command timed out: %q timed out after %s", strings.Join(cmd, " "), timeout))
		}
		return unknown(fmt.Errorf("exec in container %s: %w", containerID, err))
	}
	output := make([]byte, 0, len(resp.GetStdout())+len(resp.GetStderr()))
	output = append(append(output, resp.GetStdout()...), resp.GetStderr()...)
	if len(output) > maxOutput {
		output = output[:maxOutput]
	}
	if resp.GetExitCode() != 0 {
		return failure(string(output))
	}
	return success(string(output))
}

// isTimeout reports whether an ExecSync error means the command ran past its timeout: the runtime
// answered DeadlineExceeded, or the call's own deadline passed.
func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, noderuntime.ErrDeadlineExceeded) ||
		status.Code(err) == codes.DeadlineExceeded
}

// expandCommand expands $(VAR) references to the container's literal env values, as the kubelet does for
// exec probes (no valueFrom: probes do not see the pod's downward API or secrets). "$$" is a literal "$";
// a reference to an unknown variable is left as written.
func expandCommand(cmd []string, env []corev1.EnvVar) []string {
	vars := map[string]string{}
	for _, e := range env {
		if e.ValueFrom == nil {
			vars[e.Name] = e.Value
		}
	}
	out := make([]string, len(cmd))
	for i, arg := range cmd {
		out[i] = expand(arg, vars)
	}
	return out
}

// expand replaces $(NAME) in s with vars[NAME] and "$$" with "$".
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] != '$' || i+1 == len(s):
			b.WriteByte(s[i])
		case s[i+1] == '$':
			b.WriteByte('$')
			i++
		case s[i+1] == '(':
			i += expandRef(&b, s[i:], vars) - 1
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// expandRef writes the expansion of the reference "$(NAME)..." at the start of s and returns how many
// bytes of s it consumed.
func expandRef(b *strings.Builder, s string, vars map[string]string) int {
	end := strings.IndexByte(s, ')')
	if end < 0 {
		b.WriteString("$(")
		return 2
	}
	if v, ok := vars[s[2:end]]; ok {
		b.WriteString(v)
	} else {
		b.WriteString(s[:end+1])
	}
	return end + 1
}
