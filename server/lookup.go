package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
)

// statusError is an error with the HTTP status it answers.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &statusError{status: status, msg: fmt.Sprintf(format, args...)}
}

// writeError answers err with its status: a statusError's own, else one derived from the CRI error.
func writeError(w http.ResponseWriter, err error) {
	http.Error(w, err.Error(), errorStatus(err))
}

func errorStatus(err error) int {
	var se *statusError
	switch {
	case errors.As(err, &se):
		return se.status
	case errors.Is(err, runtime.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, runtime.ErrInvalidArgument):
		return http.StatusBadRequest
	case errors.Is(err, runtime.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, runtime.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// findPod returns the pod bound to this node by namespace and name; uid, when given, must match.
func (s *Server) findPod(ctx context.Context, namespace, name string, uid types.UID) (*corev1.Pod, error) {
	pods, err := s.opts.Pods.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	for i := range pods {
		p := &pods[i]
		if p.Namespace != namespace || p.Name != name {
			continue
		}
		if uid != "" && p.UID != uid {
			return nil, errorf(http.StatusNotFound, "pod not found")
		}
		return p, nil
	}
	return nil, errorf(http.StatusNotFound, "pod does not exist")
}

// hasContainer tells whether the pod's spec names the container (regular, init or ephemeral).
func hasContainer(pod *corev1.Pod, name string) bool {
	_, kind := podrules.FindContainer(pod, name)
	return kind != podrules.NoContainer
}

// attempts lists the runtime's containers of one pod container, newest first: those labelled with the
// pod's UID and the container's name, and only those, even if a runtime ignored part of the selector.
func (s *Server) attempts(ctx context.Context, uid types.UID, name string) ([]*runtimeapi.Container, error) {
	selector := map[string]string{runtime.LabelPodUID: string(uid), runtime.LabelContainerName: name}
	cs, err := s.opts.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	cs = slices.DeleteFunc(cs, func(c *runtimeapi.Container) bool {
		l := c.GetLabels()
		return uid == "" || l[runtime.LabelPodUID] != string(uid) || l[runtime.LabelContainerName] != name
	})
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].GetCreatedAt() > cs[j].GetCreatedAt() })
	return cs, nil
}

// requestPod returns the pod a request's path names: {namespace}/{pod}, and {uid} when the path has one.
func (s *Server) requestPod(ctx context.Context, r *http.Request) (*corev1.Pod, error) {
	return s.findPod(ctx, r.PathValue("namespace"), r.PathValue("pod"), types.UID(r.PathValue("uid")))
}

// requestContainer returns the ID of the running attempt of the container a request's path names
// ({namespace}/{pod}[/{uid}]/{container}).
func (s *Server) requestContainer(ctx context.Context, r *http.Request) (string, error) {
	pod, err := s.requestPod(ctx, r)
	if err != nil {
		return "", err
	}
	return s.runningContainer(ctx, pod, r.PathValue("container"))
}

// runningContainer returns the ID of the running attempt of the pod's container.
func (s *Server) runningContainer(ctx context.Context, pod *corev1.Pod, name string) (string, error) {
	cs, err := s.attempts(ctx, pod.UID, name)
	if err != nil {
		return "", err
	}
	for _, c := range cs {
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return c.GetId(), nil
		}
	}
	return "", errorf(http.StatusNotFound, "container not found (%q)", name)
}

// podSandbox returns the ID of the pod's ready sandbox.
func (s *Server) podSandbox(ctx context.Context, uid types.UID) (string, error) {
	sbs, err := s.opts.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{runtime.LabelPodUID: string(uid)},
	})
	if err != nil {
		return "", err
	}
	if len(sbs) == 0 {
		return "", errorf(http.StatusNotFound, "pod sandbox not found")
	}
	sort.SliceStable(sbs, func(i, j int) bool { return sbs[i].GetCreatedAt() > sbs[j].GetCreatedAt() })
	return sbs[0].GetId(), nil
}
