package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodStatus is what the runtime holds for one pod UID: its sandboxes and containers, newest first.
type PodStatus struct {
	UID       types.UID
	Name      string
	Namespace string
	// IPs of the newest ready sandbox (primary first); empty for host-network pods.
	IPs []string
	// Sandboxes, newest first.
	Sandboxes []*runtimeapi.PodSandboxStatus
	// Containers, newest first: every attempt of every container the runtime still has.
	Containers []*ContainerStatus
	// Timestamp is when the status was read.
	Timestamp time.Time
}

// ContainerStatus is one container attempt as the runtime reports it, decoded from CRI status, labels and
// annotations.
type ContainerStatus struct {
	ID           string
	Name         string
	SandboxID    string
	State        runtimeapi.ContainerState
	CreatedAt    time.Time
	StartedAt    time.Time // zero if never started
	FinishedAt   time.Time // zero if not exited
	ExitCode     int32
	Reason       string // the runtime's reason for the exit (e.g. "OOMKilled", "Error", "Completed")
	Message      string
	Image        string // the image as the pod spec names it (falls back to the runtime's image)
	ImageRef     string // the image ID the runtime resolved (a digest), for status.imageID
	Hash         uint64
	RestartCount int // the attempt number recorded at creation
	Kind         ContainerKind
	LogPath      string
	// TerminationMessagePath and Policy, as recorded at creation.
	TerminationMessagePath   string
	TerminationMessagePolicy string
	// PreStop is the JSON of the preStop handler recorded at creation, if any.
	PreStop string
	// PodTerminationGracePeriod recorded at creation (-1 if unknown).
	PodTerminationGracePeriod int64
	// TerminationLogHostPath is the host file mounted at TerminationMessagePath, if any.
	TerminationLogHostPath string
	// Resources are the Linux resources the runtime reports the container runs with (nil when it reports
	// none: older runtimes, or a container that is not running).
	Resources *runtimeapi.LinuxContainerResources
	// User is the user the runtime reports the container's process runs as (nil when it reports none).
	User *runtimeapi.ContainerUser
}

// FindContainer returns the newest attempt of the named container, or nil.
func (s *PodStatus) FindContainer(name string) *ContainerStatus {
	if s == nil {
		return nil
	}
	for _, c := range s.Containers {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// AnyContainerCreated says whether the newest attempt of one of containers was created: it was made, runs
// or exited (for a pod's regular containers: the pod was initialized).
func (s *PodStatus) AnyContainerCreated(containers []corev1.Container) bool {
	for i := range containers {
		if c := s.FindContainer(containers[i].Name); c != nil && c.State != runtimeapi.ContainerState_CONTAINER_UNKNOWN {
			return true
		}
	}
	return false
}

// ContainerAttempts returns every attempt of the named container, newest first.
func (s *PodStatus) ContainerAttempts(name string) []*ContainerStatus {
	var out []*ContainerStatus
	for _, c := range s.Containers {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// ReadySandbox returns the newest sandbox if it is ready, else nil.
func (s *PodStatus) ReadySandbox() *runtimeapi.PodSandboxStatus {
	if s == nil || len(s.Sandboxes) == 0 || s.Sandboxes[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil
	}
	return s.Sandboxes[0]
}

// RunningContainers are the pod's containers that run.
func (s *PodStatus) RunningContainers() []*ContainerStatus {
	var out []*ContainerStatus
	for _, c := range s.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			out = append(out, c)
		}
	}
	return out
}

// Active reports whether a container of the pod runs or one of its sandboxes is ready.
func (s *PodStatus) Active() bool {
	if len(s.RunningContainers()) > 0 {
		return true
	}
	return slices.ContainsFunc(s.Sandboxes, func(sb *runtimeapi.PodSandboxStatus) bool {
		return sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY
	})
}

// GetPodStatus reads everything the runtime holds for a pod UID: sandboxes (with status and IPs) and
// every container's status, as the kubelet's GetPodStatus does.
func (c *Client) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*PodStatus, error) {
	now := time.Now()
	sandboxes, err := c.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{LabelPodUID: string(uid)}})
	if err != nil {
		return nil, err
	}
	sort.Slice(sandboxes, func(i, j int) bool { return sandboxes[i].CreatedAt > sandboxes[j].CreatedAt })
	ps := &PodStatus{UID: uid, Name: name, Namespace: namespace, Timestamp: now}
	for i, sb := range sandboxes {
		st, err := c.PodSandboxStatus(ctx, sb.Id, false)
		if errors.Is(err, ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		ps.Sandboxes = append(ps.Sandboxes, st.Status)
		if i == 0 && st.Status.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ps.IPs = sandboxIPs(st.Status)
		}
	}
	containers, err := c.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{LabelPodUID: string(uid)}})
	if err != nil {
		return nil, err
	}
	for _, ctr := range containers {
		st, err := c.ContainerStatus(ctx, ctr.Id, false)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ps.Containers = append(ps.Containers, DecodeContainerStatus(st.Status, ctr.PodSandboxId))
	}
	sort.SliceStable(ps.Containers, func(i, j int) bool { return ps.Containers[i].CreatedAt.After(ps.Containers[j].CreatedAt) })
	return ps, nil
}

func sandboxIPs(s *runtimeapi.PodSandboxStatus) []string {
	n := s.GetNetwork()
	if n == nil || n.Ip == "" {
		return nil
	}
	ips := []string{n.Ip}
	for _, ip := range n.AdditionalIps {
		ips = append(ips, ip.Ip)
	}
	return ips
}

// DecodeContainerStatus turns a CRI container status into a ContainerStatus.
func DecodeContainerStatus(s *runtimeapi.ContainerStatus, sandboxID string) *ContainerStatus {
	a := s.Annotations
	cs := &ContainerStatus{
		ID: s.Id, Name: s.Metadata.Name, SandboxID: sandboxID, State: s.State,
		CreatedAt: unixNano(s.CreatedAt), StartedAt: unixNano(s.StartedAt), FinishedAt: unixNano(s.FinishedAt),
		ExitCode: s.ExitCode, Reason: s.Reason, Message: s.Message,
		Image: a[AnnotationContainerImageSpec], ImageRef: s.ImageRef, LogPath: s.LogPath,
		RestartCount:              int(s.Metadata.Attempt),
		TerminationMessagePath:    a[AnnotationTerminationMessagePath],
		TerminationMessagePolicy:  a[AnnotationTerminationMessagePolicy],
		PreStop:                   a[AnnotationContainerPreStopHandler],
		PodTerminationGracePeriod: -1,
		Resources:                 s.GetResources().GetLinux(),
		User:                      s.GetUser(),
	}
	if cs.Image == "" {
		cs.Image = s.GetImage().GetImage()
	}
	for _, m := range s.Mounts {
		if cs.TerminationMessagePath != "" && m.ContainerPath == cs.TerminationMessagePath {
			cs.TerminationLogHostPath = m.HostPath
		}
	}
	if n, err := strconv.Atoi(a[AnnotationContainerRestartCount]); err == nil {
		cs.RestartCount = n
	}
	if h, err := strconv.ParseUint(a[AnnotationContainerHash], 16, 64); err == nil {
		cs.Hash = h
	}
	if g, err := strconv.ParseInt(a[AnnotationPodTerminationGracePeriod], 10, 64); err == nil {
		cs.PodTerminationGracePeriod = g
	}
	switch {
	case a[AnnotationContainerRestartableInit] == "true":
		cs.Kind = KindSidecar
	case a[AnnotationContainerInit] == "true":
		cs.Kind = KindInit
	case a[AnnotationContainerEphemeral] == "true":
		cs.Kind = KindEphemeral
	}
	return cs
}

func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// String names a container attempt in logs.
func (c *ContainerStatus) String() string {
	return fmt.Sprintf("%s(%s#%d)", c.Name, shortID(c.ID), c.RestartCount)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// SandboxStatus reads one sandbox's status: what a caller that just ran it adds to the pod's state.
func (c *Client) SandboxStatus(ctx context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	st, err := c.PodSandboxStatus(ctx, id, false)
	if err != nil {
		return nil, err
	}
	return st.Status, nil
}

// ReadContainer reads one container's status: what a caller that just created or started it adds to the
// pod's state.
func (c *Client) ReadContainer(ctx context.Context, id, sandboxID string) (*ContainerStatus, error) {
	st, err := c.ContainerStatus(ctx, id, false)
	if err != nil {
		return nil, err
	}
	return DecodeContainerStatus(st.Status, sandboxID), nil
}

// ShallowCopy copies the status and its slices; the statuses the slices point to are shared.
func (st *PodStatus) ShallowCopy() *PodStatus {
	out := *st
	out.IPs = slices.Clone(st.IPs)
	out.Sandboxes = slices.Clone(st.Sandboxes)
	out.Containers = slices.Clone(st.Containers)
	return &out
}

// WithSandbox returns a copy of st with sb as its newest sandbox (replacing an earlier status of the same
// sandbox), and the sandbox's IPs when it is ready: what a reader that just ran the sandbox knows.
func (st *PodStatus) WithSandbox(sb *runtimeapi.PodSandboxStatus) *PodStatus {
	out := st.ShallowCopy()
	out.Sandboxes = slices.DeleteFunc(out.Sandboxes, func(s *runtimeapi.PodSandboxStatus) bool { return s.GetId() == sb.GetId() })
	out.Sandboxes = append([]*runtimeapi.PodSandboxStatus{sb}, out.Sandboxes...)
	out.IPs = nil
	if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
		out.IPs = sandboxIPs(sb)
	}
	return out
}

// WithContainer returns a copy of st with c as its newest container (replacing an earlier status of the
// same container): what a reader that just created or started the container knows.
func (st *PodStatus) WithContainer(c *ContainerStatus) *PodStatus {
	out := st.ShallowCopy()
	out.Containers = slices.DeleteFunc(out.Containers, func(s *ContainerStatus) bool { return s.ID == c.ID })
	out.Containers = append([]*ContainerStatus{c}, out.Containers...)
	return out
}
