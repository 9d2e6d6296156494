package fake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/cri-streaming/pkg/streaming"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// WithStreaming serves exec and attach for real: Start also starts a streaming server (k8s.io/cri-streaming) on
// 127.0.0.1, Exec and Attach answer its URLs, and a command runs as the container's Behaviour.Exec scripts it.
func WithStreaming() Option { return func(s *state) { s.streaming = true } }

// streamRuntime is what the streaming server runs commands through.
type streamRuntime struct{ *state }

// Exec runs cmd as the container's behaviour scripts it, its exit code reported as a command's.
func (r streamRuntime) Exec(_ context.Context, id string, cmd []string, _ io.Reader, out, errOut io.WriteCloser, _ bool,
	_ <-chan remotecommandserver.TerminalSize) error {
	r.mu.Lock()
	c, err := r.runningContainerLocked(id)
	var b Behaviour
	if err == nil {
		b = c.behaviour
	}
	r.mu.Unlock()
	if err != nil {
		return err
	}
	stdout, stderr, code := b.run(cmd)
	if out != nil {
		_, _ = io.WriteString(out, stdout)
	}
	if errOut != nil {
		_, _ = io.WriteString(errOut, stderr)
	}
	if code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command %q exited with %d", strings.Join(cmd, " "), code), Code: int(code)}
	}
	return nil
}

// Attach ends at once: a simulated container has no live output beyond its log.
func (r streamRuntime) Attach(context.Context, string, io.Reader, io.WriteCloser, io.WriteCloser, bool,
	<-chan remotecommandserver.TerminalSize) error {
	return nil
}

// PortForward is refused: nothing listens in a simulated container.
func (r streamRuntime) PortForward(context.Context, string, int32, io.ReadWriteCloser) error {
	return errors.New("port-forward: the simulated runtime has no network")
}

// startStreamingLocked starts the streaming server on a loopback port.
func (r *state) startStreamingLocked() error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("fake runtime: streaming listener: %w", err)
	}
	cfg := streaming.DefaultConfig
	cfg.Addr = lis.Addr().String()
	cfg.BaseURL = &url.URL{Scheme: "http", Host: cfg.Addr}
	s, err := streaming.NewServer(cfg, streamRuntime{r})
	if err != nil {
		_ = lis.Close()
		return fmt.Errorf("fake runtime: streaming server: %w", err)
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(lis) }()
	r.streamer = stoppable{Server: s, stop: hs.Close}
	return nil
}

// stoppable is the streaming server with the HTTP server it is served by.
type stoppable struct {
	streaming.Server
	stop func() error
}

func (s stoppable) Stop() error { return s.stop() }

// writeLogs writes lines to a CRI log file as stdout entries at now ("" or no path: nothing).
func writeLogs(path, lines string, now time.Time) error {
	if path == "" || lines == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	ts := now.UTC().Format(time.RFC3339Nano)
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(lines, "\n"), "\n") {
		fmt.Fprintf(&b, "%s stdout F %s\n", ts, l)
	}
	_, err = io.WriteString(f, b.String())
	return errors.Join(err, f.Close())
}
