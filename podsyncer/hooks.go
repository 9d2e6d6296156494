package podsyncer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podstatus"
	"github.com/nodelet/nodelet/probes"
	"github.com/nodelet/nodelet/runtime"
)

// hookTimeout bounds a postStart hook that nothing else bounds.
const hookTimeout = 2 * time.Minute

// runPostStart runs a container's postStart hook in the background. If it fails the container is
// killed (FailedPostStartHook) and restarted per the restart policy, as in the kubelet.
func (s *stopper) runPostStart(ps *PodState, pod *corev1.Pod, c *corev1.Container, id string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), hookTimeout)
		defer cancel()
		msg, err := s.runHandler(ctx, pod, c, id, c.Lifecycle.PostStart)
		if err != nil {
			s.recorder.Event(containerRef(pod, c), corev1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed")
			ctrl.Log.WithName("hooks").Info("PostStart hook failed", "pod", ps.Key, "container", c.Name, "err", err.Error(), "output", msg)
			ps.setWaiting(c.Name, podstatus.Waiting{Reason: "PostStartHookError", Message: hookFailure(err, msg)})
			grace := time.Duration(podrules.ContainerKillGracePeriod(pod, nil)) * time.Second
			s.killContainer(ctx, pod, killAction{container: &runtime.ContainerStatus{ID: id, Name: c.Name},
				message: "FailedPostStartHook", deadline: s.clock.Now().Add(grace)}, nil)
			s.changed(ps.UID)
		}
		s.enqueue(ps.Key)
	}()
}

func hookFailure(err error, output string) string {
	if output != "" {
		return fmt.Sprintf("%v, message: %q", err, output)
	}
	return err.Error()
}

// preStopHandler is the container's preStop hook: from the spec, or — for a pod the agent only knows
// from the runtime — from the handler recorded in the container's annotations.
func preStopHandler(spec *corev1.Container, c *runtime.ContainerStatus) *corev1.LifecycleHandler {
	if spec != nil {
		if spec.Lifecycle != nil {
			return spec.Lifecycle.PreStop
		}
		return nil
	}
	if c.PreStop == "" {
		return nil
	}
	h := &corev1.LifecycleHandler{}
	if err := json.Unmarshal([]byte(c.PreStop), h); err != nil {
		return nil
	}
	return h
}

// runPreStop runs a preStop hook until it ends or ctx (the grace period) does.
func (s *stopper) runPreStop(ctx context.Context, pod *corev1.Pod, spec *corev1.Container, c *runtime.ContainerStatus, h *corev1.LifecycleHandler) {
	msg, err := s.runHandler(ctx, pod, spec, c.ID, h)
	if err == nil || pod == nil {
		return
	}
	s.recorder.Event(containerRef(pod, spec), corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed")
	ctrl.LoggerFrom(ctx).Info("PreStop hook failed", "container", c.Name, "err", err.Error(), "output", msg)
}

// runHandler runs an exec, httpGet or sleep lifecycle handler.
func (s *stopper) runHandler(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string, h *corev1.LifecycleHandler) (string, error) {
	switch {
	case h.Exec != nil:
		timeout := hookTimeout
		if d, ok := ctx.Deadline(); ok {
			timeout = max(time.Until(d), time.Second)
		}
		resp, err := s.cri.ExecSync(ctx, id, h.Exec.Command, timeout)
		if err != nil {
			return "", err
		}
		out := string(resp.Stdout) + string(resp.Stderr)
		if resp.ExitCode != 0 {
			return out, fmt.Errorf("command '%s' exited with %d: %s", strings.Join(h.Exec.Command, " "), resp.ExitCode, out)
		}
		return out, nil
	case h.HTTPGet != nil:
		return "", s.runHTTPHook(ctx, pod, c, h.HTTPGet)
	case h.Sleep != nil:
		select {
		case <-ctx.Done():
			// Cut short (the grace period ended): the kubelet counts it and fails the hook.
			s.hookMetrics().sleepTerminated.Inc()
			return "", errors.New("container terminated before sleep hook finished")
		case <-s.clock.After(time.Duration(h.Sleep.Seconds) * time.Second):
		}
		return "", nil
	default:
		return "", fmt.Errorf("lifecycle handler has no action")
	}
}

// isHTTPResponseError: an HTTPS request got a plain HTTP answer (the kubelet's check).
func isHTTPResponseError(err error) bool {
	var urlErr *url.Error
	return errors.As(err, &urlErr) && strings.Contains(urlErr.Err.Error(), "server gave HTTP response to HTTPS client")
}

// runHTTPHook sends the hook's GET through the one hook client (probes.HookClient: HTTPS not verified,
// redirects followed only to the same host, as the kubelet); a status outside 200–399 is a failure.
func (s *stopper) runHTTPHook(ctx context.Context, pod *corev1.Pod, c *corev1.Container, g *corev1.HTTPGetAction) error {
	host := g.Host
	if host == "" && pod != nil {
		st, _, err := s.readPod(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			return err
		}
		if len(st.IPs) > 0 {
			host = st.IPs[0]
		} else if len(s.hostIPs) > 0 {
			host = s.hostIPs[0]
		}
	}
	req, err := probes.NewHookRequest(ctx, g, c, host)
	if err != nil {
		return err
	}
	resp, err := probes.HookClient().Do(req)
	if isHTTPResponseError(err) {
		// An HTTPS hook answered by a plain HTTP server is tried again over HTTP, as by the kubelet.
		plain := req.Clone(ctx)
		plain.URL.Scheme = "http"
		plain.Header.Del("Authorization")
		if resp, err = probes.HookClient().Do(plain); err == nil {
			s.hookMetrics().httpFallbacks.Inc()
			if pod != nil {
				s.recorder.Event(PodRef(pod), corev1.EventTypeWarning, "LifecycleHTTPFallback",
					fmt.Sprintf("request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", plain.URL.Host))
			}
		}
	}
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
		return fmt.Errorf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %s", g.Path, c.Name, pod.Name, resp.Status)
	}
	return nil
}
