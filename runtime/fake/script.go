package fake

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Exit codes of containers killed by a signal, as reported by containerd.
const (
	exitCodeSIGTERM    int32 = 143
	exitCodeSIGKILL    int32 = 137
	exitCodeStartError int32 = 128
)

// Behaviour scripts what containers of a given name do.
type Behaviour struct {
	// ExitAfter > 0 makes a started container exit by itself once this much
	// time has elapsed on the injected clock.
	ExitAfter time.Duration
	// ExitCode is the exit code used for ExitAfter.
	ExitCode int32
	// Reason is the reason used for ExitAfter, e.g. "OOMKilled". The default
	// is "Completed" for exit code 0 and "Error" otherwise.
	Reason string
	// StartError makes StartContainer fail with this message; the container
	// ends EXITED with exit code 128 and reason "StartError".
	StartError string
	// CreateError makes CreateContainer fail with this message.
	CreateError string
	// IgnoreSIGTERM makes StopContainer with a timeout > 0 wait until the
	// timeout has elapsed on the clock, then kill the container (exit code
	// 137). Without it the container exits at once with 143 (SIGTERM).
	// A timeout <= 0 always kills at once with 137.
	IgnoreSIGTERM bool
	// Logs is what the container writes to stdout when it starts, one log entry per line, in its CRI log
	// file (as the runtime writes it for the kubelet's containerLogs).
	Logs string
	// Exec answers the commands run in the container (ExecSync, and Exec with WithStreaming): by its command
	// line (the words joined by spaces), the output with exit code 0; any other command exits 127 with
	// "<command>: not found" on stderr. nil: every command succeeds with no output. A result set with
	// SetExecResult comes first.
	Exec map[string]string
	// CPUNanoCores and MemoryBytes are the usage the running container reports (0: the runtime's default).
	CPUNanoCores, MemoryBytes uint64
}

// run answers a command run in a container of this behaviour: its stdout, stderr and exit code.
func (b Behaviour) run(cmd []string) (stdout, stderr string, exitCode int32) {
	if b.Exec == nil {
		return "", "", 0
	}
	line := strings.Join(cmd, " ")
	if out, ok := b.Exec[line]; ok {
		return out, "", 0
	}
	name := line
	if len(cmd) > 0 {
		name = cmd[0]
	}
	return "", name + ": not found\n", 127
}

// AddImage puts an image into the store, with an id and a repo digest derived
// from ref.
func (r *Runtime) AddImage(ref string, sizeBytes uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addImageLocked(normalizeRef(ref), sizeBytes)
}

// SetPullable makes PullImage of ref succeed, adding an image of sizeBytes.
func (r *Runtime) SetPullable(ref string, sizeBytes uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pullable[normalizeRef(ref)] = sizeBytes
}

// SetImageUser sets the User of the image config of ref (as in a Dockerfile's USER: "1234",
// "app" or "1234:5678"), for the image already stored and for one added or pulled later. ImageStatus
// reports it as containerd does: a numeric user as Uid, any other as Username. Images have no user
// unless set.
func (r *Runtime) SetImageUser(ref, user string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	norm := normalizeRef(ref)
	r.imageUsers[norm] = user
	if img := r.findImageLocked(norm); img != nil {
		img.user = user
	}
}

// PullAuths returns the credentials PullImage received for ref, one entry per
// call in call order (nil for a pull without credentials).
func (r *Runtime) PullAuths(ref string) []*runtimeapi.AuthConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	auths := r.pullAuths[normalizeRef(ref)]
	out := make([]*runtimeapi.AuthConfig, 0, len(auths))
	for _, a := range auths {
		out = append(out, proto.CloneOf(a))
	}
	return out
}

// ScriptContainer sets the behaviour of containers named name (metadata name)
// that are created after the call.
func (r *Runtime) ScriptContainer(name string, b Behaviour) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.behaviours[name] = b
}

// SetExecResult sets what ExecSync returns for containers named
// containerName. The default is exit code 0 with empty output.
func (r *Runtime) SetExecResult(containerName string, stdout, stderr []byte, exitCode int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.execResults[containerName] = &runtimeapi.ExecSyncResponse{
		Stdout:   slices.Clone(stdout),
		Stderr:   slices.Clone(stderr),
		ExitCode: exitCode,
	}
}

// SetRuntimeReady sets the RuntimeReady condition reported by Status.
func (r *Runtime) SetRuntimeReady(ready bool, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runtimeCond = condition{ready: ready, reason: reason, message: message}
}

// SetNetworkReady sets the NetworkReady condition reported by Status.
func (r *Runtime) SetNetworkReady(ready bool, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.networkCond = condition{ready: ready, reason: reason, message: message}
}

// ExitContainer makes the running container id exit now. An empty reason
// defaults to "Completed" for exit code 0 and "Error" otherwise.
func (r *Runtime) ExitContainer(id string, exitCode int32, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("container %q: %w", id, errNotFound)
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return fmt.Errorf("container %q is in state %s: %w", id, c.state, errNotRunning)
	}
	r.exitLocked(c, exitCode, reason, "")
	return nil
}

// PodCIDR returns the pod CIDR last set through UpdateRuntimeConfig.
func (r *Runtime) PodCIDR() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.podCIDR
}

// Calls returns the CRI method names called so far, in call order.
func (r *Runtime) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Exits returns the IDs of the containers that have exited, in the order they exited (removed ones included),
// so tests can check a stop order after the containers are gone.
func (r *Runtime) Exits() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.exits)
}

// ResetCalls forgets the recorded calls.
func (r *Runtime) ResetCalls() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

// AssertCalls returns an error describing the difference when the recorded
// calls are not exactly expected, in order.
func (r *Runtime) AssertCalls(expected []string) error {
	got := r.Calls()
	if slices.Equal(got, expected) {
		return nil
	}
	i := 0
	for i < len(got) && i < len(expected) && got[i] == expected[i] {
		i++
	}
	return fmt.Errorf("calls differ at index %d (expected %s, got %s):\nexpected: [%s]\ngot:      [%s]",
		i, at(expected, i), at(got, i), strings.Join(expected, " "), strings.Join(got, " "))
}

func at(s []string, i int) string {
	if i < len(s) {
		return fmt.Sprintf("%q", s[i])
	}
	return "nothing"
}

// InjectError makes every call of method (e.g. "RunPodSandbox") fail with err.
// A nil err clears all errors injected for method. err is returned as-is when
// it is a gRPC status error, else wrapped as codes.Unknown.
func (r *Runtime) InjectError(method string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.errs, method)
		delete(r.onceErrs, method)
		return
	}
	r.errs[method] = toStatusError(err)
}

// InjectErrorOnce makes the next call of method fail with err. Errors queued
// this way are used in order, before any error set with InjectError.
func (r *Runtime) InjectErrorOnce(method string, err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onceErrs[method] = append(r.onceErrs[method], toStatusError(err))
}

func toStatusError(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unknown, err.Error())
}

// begin records a call of method and returns the error injected for it.
func (r *state) begin(method string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.beginLocked(method)
}

func (r *state) beginLocked(method string) error {
	r.calls = append(r.calls, method)
	if q := r.onceErrs[method]; len(q) > 0 {
		r.onceErrs[method] = q[1:]
		return q[0]
	}
	return r.errs[method]
}

// Sandboxes returns deep copies of all pod sandboxes, in creation order.
func (r *Runtime) Sandboxes() []*runtimeapi.PodSandbox {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listSandboxesLocked(nil)
}

// Containers returns deep copies of all containers, in creation order.
func (r *Runtime) Containers() []*runtimeapi.Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listContainersLocked(nil)
}

// ContainerConfig returns a deep copy of the config the container was created with, or nil for an
// unknown container.
func (r *Runtime) ContainerConfig(id string) *runtimeapi.ContainerConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return nil
	}
	return proto.CloneOf(c.config)
}

// EventSubscribers returns the number of open GetContainerEvents streams, so
// tests can wait for a subscription before causing events.
func (r *Runtime) EventSubscribers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.subs)
}
