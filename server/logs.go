package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// containerLogs serves /containerLogs/{namespace}/{pod}/{container} from the container's CRI log file, with
// the kubelet's PodLogOptions: follow, tailLines (or tail), timestamps, sinceSeconds, sinceTime, limitBytes,
// previous and stream.
func (s logHandlers) containerLogs(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	opts, previous, err := parseLogOptions(r.URL.Query(), s.opts.Clock.Now())
	if err != nil {
		writeError(w, err)
		return
	}
	target, err := s.logTarget(ctx, r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container"), previous)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	out := &flushWriter{w: w, rc: http.NewResponseController(w)}
	if err := s.readLogs(ctx, target, opts, out); err != nil && !out.wrote {
		writeError(w, errorf(http.StatusBadRequest, "%s", err.Error()))
	}
}

// flushWriter sends every write to the client at once (followed logs are read as they come).
type flushWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	wrote bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.wrote = true
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, f.rc.Flush()
}

// parseLogOptions reads the query as the kubelet decodes v1.PodLogOptions and validates it: a malformed
// value is a 400, an invalid combination a 422.
func parseLogOptions(q url.Values, now time.Time) (opts logOptions, previous bool, err error) {
	opts = logOptions{tail: -1, limitBytes: -1}
	p := queryParser{q: q}
	opts.follow = p.bool("follow")
	opts.timestamps = p.bool("timestamps")
	previous = p.bool("previous")
	tail := p.int("tailLines")
	if t := q.Get("tail"); t != "" && t != "all" {
		tail = p.int("tail")
	}
	limit, sinceSeconds, sinceTime := p.int("limitBytes"), p.int("sinceSeconds"), p.time("sinceTime")
	opts.stream = q.Get("stream")
	if p.err != nil {
		return opts, false, errorf(http.StatusBadRequest, `{"message": "Unable to decode query."}`)
	}
	if err := validateLogOptions(tail, limit, sinceSeconds, sinceTime, opts.stream); err != nil {
		return opts, false, err
	}
	if tail != nil {
		opts.tail = *tail
	}
	if limit != nil {
		opts.limitBytes = *limit
	}
	switch {
	case sinceSeconds != nil:
		opts.since = now.Add(-time.Duration(*sinceSeconds) * time.Second)
	case sinceTime != nil:
		opts.since = *sinceTime
	}
	return opts, previous, nil
}

func validateLogOptions(tail, limit, sinceSeconds *int64, sinceTime *time.Time, stream string) error {
	invalid := (tail != nil && *tail < 0) || (limit != nil && *limit < 1) ||
		(sinceSeconds != nil && *sinceSeconds < 1) || (sinceSeconds != nil && sinceTime != nil)
	switch stream {
	case "", corev1.LogStreamAll, corev1.LogStreamStdout, corev1.LogStreamStderr:
	default:
		invalid = true
	}
	if stream != "" && stream != corev1.LogStreamAll && tail != nil {
		invalid = true // tailLines counts lines of both streams: the API refuses it with one stream
	}
	if invalid {
		return errorf(http.StatusUnprocessableEntity, `{"message": "Invalid request."}`)
	}
	return nil
}

// queryParser reads typed query values, remembering the first malformed one.
type queryParser struct {
	q   url.Values
	err error
}

func (p *queryParser) bool(k string) bool {
	v := p.q.Get(k)
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	p.keep(err)
	return b
}

func (p *queryParser) int(k string) *int64 {
	v := p.q.Get(k)
	if v == "" {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	p.keep(err)
	return &n
}

func (p *queryParser) time(k string) *time.Time {
	v := p.q.Get(k)
	if v == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339, v)
	p.keep(err)
	return &t
}

func (p *queryParser) keep(err error) {
	if p.err == nil {
		p.err = err
	}
}

// logTarget is the log file to read and the container that writes it.
type logTarget struct {
	path        string
	containerID string
}

// logTarget picks the container attempt as the kubelet does (previous: the last terminated attempt).
// Only the runtime's attempts of this pod's container (by pod UID and container name) can be picked: the
// pod's status, which anyone who may write pods/status controls, only says which of them to read.
func (s logHandlers) logTarget(ctx context.Context, namespace, podName, container string, previous bool) (logTarget, error) {
	pod, err := s.findPod(ctx, namespace, podName, "")
	if err != nil {
		return logTarget{}, err
	}
	if !hasContainer(pod, container) {
		return logTarget{}, errorf(http.StatusNotFound, "container %q not found in pod %q", container, podName)
	}
	attempts, err := s.attempts(ctx, pod.UID, container)
	if err != nil {
		return logTarget{}, err
	}
	id, err := chooseAttempt(pod, container, attempts, previous)
	if err != nil {
		return logTarget{}, err
	}
	path, err := s.logPath(ctx, pod, id)
	return logTarget{path: path, containerID: id}, err
}

// chooseAttempt is the ID of the attempt to read among attempts (the pod container's, newest first). The
// status's choice counts only when it names one of them; otherwise (no status yet, or a container ID the
// agent did not write) the runtime's order decides: the newest attempt, or the one before for previous.
func chooseAttempt(pod *corev1.Pod, name string, attempts []*runtimeapi.Container, previous bool) (string, error) {
	id, err := statusContainerID(pod, name, previous)
	switch {
	case err == nil && slices.ContainsFunc(attempts, func(c *runtimeapi.Container) bool { return c.GetId() == id }):
		return id, nil
	case err != nil && !errors.Is(err, errNoStatus):
		return "", err
	}
	i := 0
	if previous {
		i = 1
	}
	if i < len(attempts) {
		return attempts[i].GetId(), nil
	}
	if previous {
		return "", errorf(http.StatusBadRequest, "previous terminated container %q in pod %q not found", name, pod.Name)
	}
	return "", errorf(http.StatusBadRequest, "container %q in pod %q is waiting to start: ContainerCreating", name, pod.Name)
}

// errNoStatus: the pod's status does not list the container yet.
var errNoStatus = errors.New("no container status")

// statusContainerID is the kubelet's choice of container from its status.
func statusContainerID(pod *corev1.Pod, name string, previous bool) (string, error) {
	st := containerStatus(pod, name)
	if st == nil {
		if previous {
			return "", errorf(http.StatusBadRequest, "previous terminated container %q in pod %q not found", name, pod.Name)
		}
		return "", errNoStatus
	}
	last := st.LastTerminationState.Terminated
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", errorf(http.StatusBadRequest, "previous terminated container %q in pod %q not found", name, pod.Name)
		}
		return trimRuntime(last.ContainerID), nil
	case st.State.Running != nil:
		return trimRuntime(st.ContainerID), nil
	case st.State.Terminated != nil && st.State.Terminated.ContainerID != "":
		return trimRuntime(st.State.Terminated.ContainerID), nil
	case last != nil && last.ContainerID != "":
		return trimRuntime(last.ContainerID), nil
	case st.State.Terminated != nil:
		return "", errorf(http.StatusBadRequest, "container %q in pod %q is terminated", name, pod.Name)
	case st.State.Waiting != nil:
		return "", errorf(http.StatusBadRequest, "container %q in pod %q is waiting to start: %s", name, pod.Name, st.State.Waiting.Reason)
	}
	return "", errNoStatus
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses,
		pod.Status.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// trimRuntime drops the "containerd://" prefix of a status container ID.
func trimRuntime(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		return id[i+3:]
	}
	return id
}

// logPath is the log file of the container with that ID, which must be one of pod's attempts.
func (s logHandlers) logPath(ctx context.Context, pod *corev1.Pod, id string) (string, error) {
	resp, err := s.opts.Runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		return "", fmt.Errorf("container status of %s: %w", id, err)
	}
	return containerLogFile(s.opts.PodLogsDir, pod, resp.GetStatus())
}

// containerLogFile is a container's log file as the runtime reports it, else where nodelet asks runtimes
// to write it: <podLogsDir>/<namespace>_<name>_<uid>/<container>/<restartCount>.log. Either way it must lie
// inside podLogsDir: the node API never reads a file elsewhere, whatever a runtime or a container's labels
// and annotations say.
func containerLogFile(podLogsDir string, pod *corev1.Pod, st *runtimeapi.ContainerStatus) (string, error) {
	p := st.GetLogPath()
	if p == "" {
		restarts, err := strconv.Atoi(st.GetAnnotations()[runtime.AnnotationContainerRestartCount])
		if err != nil {
			restarts = 0
		}
		dir, err := podconfig.PodLogDir(podLogsDir, pod)
		if err != nil {
			return "", errorf(http.StatusBadRequest, "%s", err.Error())
		}
		file, err := podconfig.ContainerLogPath(st.GetMetadata().GetName(), restarts)
		if err != nil {
			return "", errorf(http.StatusBadRequest, "%s", err.Error())
		}
		p = filepath.Join(dir, file)
	}
	if !podrules.InsideDir(podLogsDir, p) {
		return "", errorf(http.StatusForbidden, "log file of container %s is outside the pod logs directory", st.GetId())
	}
	return p, nil
}

// containerRunning tells whether the container still runs (and may write more); an unreachable runtime
// counts as running, as containers outlive it.
func (s logHandlers) containerRunning(ctx context.Context, id string) (bool, error) {
	resp, err := s.opts.Runtime.ContainerStatus(ctx, id, false)
	switch {
	case errors.Is(err, runtime.ErrUnavailable):
		return true, nil
	case errors.Is(err, runtime.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING, nil
}
