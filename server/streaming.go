package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/proxy"
	translator "k8s.io/apiserver/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	ctrl "sigs.k8s.io/controller-runtime"
)

// streamOptions are the exec and attach query parameters the API server sends (input, output, error, tty).
type streamOptions struct {
	stdin, stdout, stderr, tty bool
}

// parseStreamOptions reads them as the kubelet does: stderr is dropped with a TTY, and one stream is needed.
func parseStreamOptions(q url.Values) (streamOptions, error) {
	flag := func(k string) bool { v := q.Get(k); return v == "1" || v == "true" }
	o := streamOptions{
		stdin: flag(corev1.ExecStdinParam), stdout: flag(corev1.ExecStdoutParam),
		stderr: flag(corev1.ExecStderrParam), tty: flag(corev1.ExecTTYParam),
	}
	if o.tty {
		o.stderr = false
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, errorf(http.StatusBadRequest, "you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

// exec serves /exec/{namespace}/{pod}[/{uid}]/{container}: the runtime's streaming URL, proxied.
func (s streamHandlers) exec(w http.ResponseWriter, r *http.Request) {
	s.serveStream(w, r, "exec", func(ctx context.Context, id string, o streamOptions) (string, error) {
		return s.opts.Runtime.Exec(ctx, &runtimeapi.ExecRequest{
			ContainerId: id, Cmd: r.URL.Query()[corev1.ExecCommandParam],
			Tty: o.tty, Stdin: o.stdin, Stdout: o.stdout, Stderr: o.stderr,
		})
	})
}

// attach serves /attach/{namespace}/{pod}[/{uid}]/{container}.
func (s streamHandlers) attach(w http.ResponseWriter, r *http.Request) {
	s.serveStream(w, r, "attach", func(ctx context.Context, id string, o streamOptions) (string, error) {
		return s.opts.Runtime.Attach(ctx, &runtimeapi.AttachRequest{
			ContainerId: id, Tty: o.tty, Stdin: o.stdin, Stdout: o.stdout, Stderr: o.stderr,
		})
	})
}

type streamFunc func(ctx context.Context, containerID string, o streamOptions) (string, error)

// serveStream finds the running container, asks the runtime for a streaming URL and proxies the upgraded
// connection to it: SPDY as is, a WebSocket (v5 remotecommand) translated to SPDY.
func (s streamHandlers) serveStream(w http.ResponseWriter, r *http.Request, subresource string, open streamFunc) {
	o, err := parseStreamOptions(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	ctx := r.Context()
	id, err := s.requestContainer(ctx, r)
	if err != nil {
		writeError(w, err)
		return
	}
	location, err := streamURL(open(ctx, id, o))
	if err != nil {
		writeError(w, err)
		return
	}
	h := upgradeProxy(location)
	if wsstream.IsWebSocketRequestWithStreamCloseProtocol(r) {
		s.http.websocketRequest(subresource)
		h = translator.NewStreamTranslatorHandler(location, nil, 0, translator.Options{
			Stdin: o.stdin, Stdout: o.stdout, Stderr: o.stderr, Tty: o.tty,
		})
	}
	h.ServeHTTP(w, r)
}

// portForward serves /portForward/{namespace}/{pod}[/{uid}]: SPDY proxied, a WebSocket tunnel unwrapped.
func (s streamHandlers) portForward(w http.ResponseWriter, r *http.Request) {
	ports, err := parsePorts(r.URL.Query()[corev1.PortHeader])
	if err != nil {
		writeError(w, err)
		return
	}
	ctx := r.Context()
	pod, err := s.requestPod(ctx, r)
	if err != nil {
		writeError(w, err)
		return
	}
	sandbox, err := s.podSandbox(ctx, pod.UID)
	if err != nil {
		writeError(w, err)
		return
	}
	location, err := streamURL(s.opts.Runtime.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sandbox, Port: ports}))
	if err != nil {
		writeError(w, err)
		return
	}
	h := upgradeProxy(location)
	if wsstream.IsWebSocketRequestWithTunnelingProtocol(r) {
		s.http.websocketRequest("portforward")
		h = translator.NewTunnelingHandler(h)
	}
	h.ServeHTTP(w, r)
}

// parsePorts reads the optional port parameters (the SPDY protocol names ports per stream instead).
func parsePorts(values []string) ([]int32, error) {
	var ports []int32
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
			if err != nil || n == 0 {
				return nil, errorf(http.StatusBadRequest, "unable to parse %q as a port", p)
			}
			ports = append(ports, int32(n))
		}
	}
	return ports, nil
}

func streamURL(raw string, err error) (*url.URL, error) {
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("runtime streaming URL %q: %w", raw, err)
	}
	return u, nil
}

// upgradeProxy proxies an upgrade request to the runtime's streaming server; a plain request is refused.
func upgradeProxy(location *url.URL) http.Handler {
	return proxy.NewUpgradeAwareHandler(location, nil, false, true, proxyResponder{})
}

// proxyResponder logs and answers proxy failures: with the status an API error carries, else 500.
type proxyResponder struct{}

// Error implements proxy.ErrorResponder.
func (proxyResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code = int(status.Status().Code)
	}
	ctrl.LoggerFrom(r.Context()).V(2).Info("Error while proxying a stream", "path", r.URL.Path, "err", err.Error())
	http.Error(w, err.Error(), code)
}

// run serves POST /run/{namespace}/{pod}[/{uid}]/{container}?cmd=...: the command runs to its end and its
// output (stdout then stderr) is the body; a non-zero exit is a 500 carrying the output.
func (s streamHandlers) run(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := s.requestContainer(ctx, r)
	if err != nil {
		writeError(w, err)
		return
	}
	cmd := strings.Split(r.URL.Query().Get("cmd"), " ")
	resp, err := s.opts.Runtime.ExecSync(ctx, id, cmd, 0)
	if err != nil {
		writeError(w, err)
		return
	}
	out := append(append([]byte{}, resp.GetStdout()...), resp.GetStderr()...)
	if resp.GetExitCode() != 0 {
		http.Error(w, fmt.Sprintf("command '%s' exited with %d: %s", strings.Join(cmd, " "), resp.GetExitCode(), out),
			http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}
