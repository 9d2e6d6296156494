package fake

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var (
	errNotFound   = errors.New("not found")
	errNotRunning = errors.New("container is not running")
)

// hostIP is the pod IP reported for host-network sandboxes.
const hostIP = "10.0.2.15"

type sandbox struct {
	id        string
	seq       uint64
	config    *runtimeapi.PodSandboxConfig
	handler   string
	state     runtimeapi.PodSandboxState
	createdAt int64
	ip        string
}

type container struct {
	id         string
	sandboxID  string
	seq        uint64
	config     *runtimeapi.ContainerConfig
	imageName  string // first repo tag, or the requested image
	imageRef   string // repo digest, or the image id
	imageID    string
	state      runtimeapi.ContainerState
	createdAt  int64
	startedAt  int64
	finishedAt int64
	exitCode   int32
	reason     string
	message    string
	logPath    string
	resources  *runtimeapi.ContainerResources
	behaviour  Behaviour
	cancelExit func()
	exited     chan struct{} // closed when the container exits
}

func (c *container) cancelTimer() {
	if c.cancelExit != nil {
		c.cancelExit()
		c.cancelExit = nil
	}
}

func newID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails, see crypto/rand.Read
	return hex.EncodeToString(b)
}

// nextIP returns a unique pod IP in 10.88.0.0/16, skipping .0/.1/.255.
func (r *state) nextIP() string {
	n := r.ipSeq
	r.ipSeq++
	return fmt.Sprintf("10.88.%d.%d", (n/253)%256, n%253+2)
}

func defaultReason(exitCode int32, reason string) string {
	switch {
	case reason != "":
		return reason
	case exitCode == 0:
		return "Completed"
	default:
		return "Error"
	}
}

func (s *sandbox) proto() *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{
		Id:             s.id,
		Metadata:       proto.CloneOf(s.config.GetMetadata()),
		State:          s.state,
		CreatedAt:      s.createdAt,
		Labels:         maps.Clone(s.config.GetLabels()),
		Annotations:    maps.Clone(s.config.GetAnnotations()),
		RuntimeHandler: s.handler,
	}
}

func (s *sandbox) status() *runtimeapi.PodSandboxStatus {
	nsOpts := s.config.GetLinux().GetSecurityContext().GetNamespaceOptions()
	return &runtimeapi.PodSandboxStatus{
		Id:        s.id,
		Metadata:  proto.CloneOf(s.config.GetMetadata()),
		State:     s.state,
		CreatedAt: s.createdAt,
		Network:   &runtimeapi.PodSandboxNetworkStatus{Ip: s.ip},
		Linux: &runtimeapi.LinuxPodSandboxStatus{
			Namespaces: &runtimeapi.Namespace{Options: proto.CloneOf(nsOpts)},
		},
		Labels:         maps.Clone(s.config.GetLabels()),
		Annotations:    maps.Clone(s.config.GetAnnotations()),
		RuntimeHandler: s.handler,
	}
}

func (s *sandbox) hostNetwork() bool {
	nsOpts := s.config.GetLinux().GetSecurityContext().GetNamespaceOptions()
	return nsOpts.GetNetwork() == runtimeapi.NamespaceMode_NODE
}

func (c *container) imageSpec() *runtimeapi.ImageSpec {
	return &runtimeapi.ImageSpec{
		Image:              c.imageName,
		UserSpecifiedImage: c.config.GetImage().GetUserSpecifiedImage(),
		Annotations:        maps.Clone(c.config.GetImage().GetAnnotations()),
	}
}

func (c *container) proto() *runtimeapi.Container {
	return &runtimeapi.Container{
		Id:           c.id,
		PodSandboxId: c.sandboxID,
		Metadata:     proto.CloneOf(c.config.GetMetadata()),
		Image:        c.imageSpec(),
		ImageRef:     c.imageID,
		State:        c.state,
		CreatedAt:    c.createdAt,
		Labels:       maps.Clone(c.config.GetLabels()),
		Annotations:  maps.Clone(c.config.GetAnnotations()),
		ImageId:      c.imageID,
	}
}

func (c *container) status() *runtimeapi.ContainerStatus {
	mounts := make([]*runtimeapi.Mount, 0, len(c.config.GetMounts()))
	for _, m := range c.config.GetMounts() {
		mounts = append(mounts, proto.CloneOf(m))
	}
	return &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    proto.CloneOf(c.config.GetMetadata()),
		State:       c.state,
		CreatedAt:   c.createdAt,
		StartedAt:   c.startedAt,
		FinishedAt:  c.finishedAt,
		ExitCode:    c.exitCode,
		Image:       c.imageSpec(),
		ImageRef:    c.imageRef,
		Reason:      c.reason,
		Message:     c.message,
		Labels:      maps.Clone(c.config.GetLabels()),
		Annotations: maps.Clone(c.config.GetAnnotations()),
		Mounts:      mounts,
		LogPath:     c.logPath,
		Resources:   proto.CloneOf(c.resources),
		ImageId:     c.imageID,
		StopSignal:  c.config.GetStopSignal(),
		User:        containerUser(c.config.GetLinux().GetSecurityContext()),
	}
}

// containerUser is the user a container of the fake runs as: its runAsUser and runAsGroup (root without),
// the group first among its supplementary groups, as a runtime reports it (the image adds none here).
func containerUser(sc *runtimeapi.LinuxContainerSecurityContext) *runtimeapi.ContainerUser {
	uid, gid := sc.GetRunAsUser().GetValue(), sc.GetRunAsGroup().GetValue()
	groups := []int64{gid}
	for _, g := range sc.GetSupplementalGroups() {
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	return &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: uid, Gid: gid, SupplementalGroups: groups}}
}

func matchLabels(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// matchID matches ids by prefix, like containerd's truncated-id lookup.
func matchID(id, filter string) bool {
	return strings.HasPrefix(id, filter)
}

func (s *sandbox) matches(f *runtimeapi.PodSandboxFilter) bool {
	if f == nil {
		return true
	}
	if !matchID(s.id, f.GetId()) {
		return false
	}
	if f.GetState() != nil && f.GetState().GetState() != s.state {
		return false
	}
	return matchLabels(s.config.GetLabels(), f.GetLabelSelector())
}

func (c *container) matches(f *runtimeapi.ContainerFilter) bool {
	if f == nil {
		return true
	}
	if !matchID(c.id, f.GetId()) || !matchID(c.sandboxID, f.GetPodSandboxId()) {
		return false
	}
	if f.GetState() != nil && f.GetState().GetState() != c.state {
		return false
	}
	return matchLabels(c.config.GetLabels(), f.GetLabelSelector())
}

func (r *state) sortedSandboxesLocked() []*sandbox {
	out := slices.Collect(maps.Values(r.sandboxes))
	slices.SortFunc(out, func(a, b *sandbox) int { return compareSeq(a.seq, b.seq) })
	return out
}

func (r *state) sortedContainersLocked() []*container {
	out := slices.Collect(maps.Values(r.containers))
	slices.SortFunc(out, func(a, b *container) int { return compareSeq(a.seq, b.seq) })
	return out
}

func compareSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	default:
		return 0
	}
}

func (r *state) listSandboxesLocked(f *runtimeapi.PodSandboxFilter) []*runtimeapi.PodSandbox {
	out := []*runtimeapi.PodSandbox{}
	for _, s := range r.sortedSandboxesLocked() {
		if s.matches(f) {
			out = append(out, s.proto())
		}
	}
	return out
}

func (r *state) listContainersLocked(f *runtimeapi.ContainerFilter) []*runtimeapi.Container {
	out := []*runtimeapi.Container{}
	for _, c := range r.sortedContainersLocked() {
		if c.matches(f) {
			out = append(out, c.proto())
		}
	}
	return out
}

// containersOfLocked returns the containers of sandbox id in creation order.
func (r *state) containersOfLocked(id string) []*container {
	var out []*container
	for _, c := range r.sortedContainersLocked() {
		if c.sandboxID == id {
			out = append(out, c)
		}
	}
	return out
}

func (r *state) containerStatusesLocked(sandboxID string) []*runtimeapi.ContainerStatus {
	var out []*runtimeapi.ContainerStatus
	for _, c := range r.containersOfLocked(sandboxID) {
		out = append(out, c.status())
	}
	return out
}

// exitLocked moves a running (or failing to start) container to EXITED and
// publishes CONTAINER_STOPPED_EVENT.
func (r *state) exitLocked(c *container, exitCode int32, reason, message string) {
	c.cancelTimer()
	c.state = runtimeapi.ContainerState_CONTAINER_EXITED
	c.finishedAt = r.now()
	r.exits = append(r.exits, c.id)
	c.exitCode = exitCode
	c.reason = defaultReason(exitCode, reason)
	c.message = message
	close(c.exited)
	r.publishLocked(c.sandboxID, c.id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
}

func invalidArg(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

func (r *state) sandboxLocked(id string) (*sandbox, error) {
	if id == "" {
		return nil, invalidArg("pod sandbox id must not be empty")
	}
	s, ok := r.sandboxes[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "an error occurred when try to find sandbox %q: %v", id, errNotFound)
	}
	return s, nil
}

func (r *state) containerLocked(id string) (*container, error) {
	if id == "" {
		return nil, invalidArg("container id must not be empty")
	}
	c, ok := r.containers[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "an error occurred when try to find container %q: %v", id, errNotFound)
	}
	return c, nil
}

func (r *state) runningContainerLocked(id string) (*container, error) {
	c, err := r.containerLocked(id)
	if err != nil {
		return nil, err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is in %s state: %v", id, c.state, errNotRunning)
	}
	return c, nil
}
