package fake_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/runtime/fake"
)

const (
	testImage = "registry.example.com/app:1.0"
	waitLimit = 5 * time.Second
	maxSocket = 100 // unix socket paths are limited to 104-108 bytes
)

type env struct {
	rt    *fake.Runtime
	rc    runtimeapi.RuntimeServiceClient
	ic    runtimeapi.ImageServiceClient
	ctx   context.Context
	clock *clocktesting.FakeClock
}

func socketPath(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cri.sock")
	if len(path) <= maxSocket {
		return path
	}
	dir, err := os.MkdirTemp("", "crifake")
	if err != nil {
		t.Fatalf("make temp dir: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "cri.sock")
}

// start serves a fake runtime on a fresh socket, driven by a fake clock, and
// dials it with the real gRPC client.
func start(t *testing.T, opts ...fake.Option) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt := fake.New(append([]fake.Option{fake.WithClock(clk)}, opts...)...)
	endpoint, err := rt.Start(socketPath(t))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(rt.Stop)
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	rt.AddImage(testImage, 1000)
	return &env{
		rt:    rt,
		rc:    runtimeapi.NewRuntimeServiceClient(conn),
		ic:    runtimeapi.NewImageServiceClient(conn),
		ctx:   ctx,
		clock: clk,
	}
}

func sandboxConfig(name string, labels map[string]string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		LogDirectory: "/var/log/pods/default_" + name,
		Labels:       labels,
		Annotations:  map[string]string{"note": name},
	}
}

func (e *env) runSandbox(t *testing.T, name string, labels map[string]string) string {
	t.Helper()
	resp, err := e.rc.RunPodSandbox(e.ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig(name, labels)})
	if err != nil {
		t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	return resp.GetPodSandboxId()
}

func containerConfig(name string, labels map[string]string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: testImage},
		Labels:   labels,
		LogPath:  name + "/0.log",
		Mounts:   []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/tmp/data"}},
	}
}

func (e *env) createContainer(t *testing.T, sandboxID, name string, labels map[string]string) string {
	t.Helper()
	resp, err := e.rc.CreateContainer(e.ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sandboxID,
		Config:       containerConfig(name, labels),
	})
	if err != nil {
		t.Fatalf("CreateContainer %s: %v", name, err)
	}
	return resp.GetContainerId()
}

func (e *env) startContainer(t *testing.T, sandboxID, name string) string {
	t.Helper()
	id := e.createContainer(t, sandboxID, name, nil)
	if _, err := e.rc.StartContainer(e.ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StartContainer %s: %v", name, err)
	}
	return id
}

func (e *env) containerStatus(t *testing.T, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := e.rc.ContainerStatus(e.ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatalf("ContainerStatus %s: %v", id, err)
	}
	return resp.GetStatus()
}

func (e *env) sandboxStatus(t *testing.T, id string) *runtimeapi.PodSandboxStatus {
	t.Helper()
	resp, err := e.rc.PodSandboxStatus(e.ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		t.Fatalf("PodSandboxStatus %s: %v", id, err)
	}
	return resp.GetStatus()
}

// eventuallyExited waits until the container is EXITED and returns its status.
func (e *env) eventuallyExited(t *testing.T, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	g := gomega.NewWithT(t)
	var st *runtimeapi.ContainerStatus
	g.Eventually(func() runtimeapi.ContainerState {
		st = e.containerStatus(t, id)
		return st.GetState()
	}).WithTimeout(waitLimit).Should(gomega.Equal(runtimeapi.ContainerState_CONTAINER_EXITED))
	return st
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Fatalf("error code = %v (err %v), want %v", got, err, code)
	}
}

func TestSandboxLifecycle(t *testing.T) {
	e := start(t)
	id := e.runSandbox(t, "web", map[string]string{"app": "web"})
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(id) {
		t.Fatalf("sandbox id %q is not 64 hex digits", id)
	}
	st := e.sandboxStatus(t, id)
	if st.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY || st.GetMetadata().GetName() != "web" ||
		st.GetLabels()["app"] != "web" || st.GetAnnotations()["note"] != "web" {
		t.Fatalf("unexpected status %v", st)
	}
	if !strings.HasPrefix(st.GetNetwork().GetIp(), "10.88.") {
		t.Fatalf("pod IP %q not in 10.88.0.0/16", st.GetNetwork().GetIp())
	}
	if st.GetCreatedAt() != e.clock.Now().UnixNano() {
		t.Fatalf("createdAt %d, want clock time", st.GetCreatedAt())
	}
	other := e.sandboxStatus(t, e.runSandbox(t, "other", nil))
	if other.GetNetwork().GetIp() == st.GetNetwork().GetIp() {
		t.Fatalf("pod IPs are not unique: %s", other.GetNetwork().GetIp())
	}

	for i := range 2 { // stop is idempotent
		if _, err := e.rc.StopPodSandbox(e.ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatalf("StopPodSandbox #%d: %v", i, err)
		}
	}
	if got := e.sandboxStatus(t, id).GetState(); got != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("state after stop = %v", got)
	}
	for i := range 2 { // removing a removed sandbox succeeds
		if _, err := e.rc.RemovePodSandbox(e.ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatalf("RemovePodSandbox #%d: %v", i, err)
		}
	}
	_, err := e.rc.PodSandboxStatus(e.ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	wantCode(t, err, codes.NotFound)
	_, err = e.rc.StopPodSandbox(e.ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	wantCode(t, err, codes.NotFound)
}

func TestRunPodSandboxVariants(t *testing.T) {
	hostNet := sandboxConfig("host", nil)
	hostNet.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
	}}
	tests := []struct {
		name    string
		req     *runtimeapi.RunPodSandboxRequest
		code    codes.Code
		wantIP  string
		handler string
	}{
		{name: "host network", req: &runtimeapi.RunPodSandboxRequest{Config: hostNet}, wantIP: "10.0.2.15"},
		{name: "known handler", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("a", nil), RuntimeHandler: "kata"}, handler: "kata"},
		{name: "unknown handler", req: &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("b", nil), RuntimeHandler: "gvisor"}, code: codes.Unknown},
		{name: "nil config", req: &runtimeapi.RunPodSandboxRequest{}, code: codes.InvalidArgument},
		{name: "no metadata", req: &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{}}, code: codes.InvalidArgument},
	}
	e := start(t, fake.WithRuntimeHandlers("runc", "kata"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := e.rc.RunPodSandbox(e.ctx, tc.req)
			wantCode(t, err, tc.code)
			if tc.code != codes.OK {
				return
			}
			st := e.sandboxStatus(t, resp.GetPodSandboxId())
			if tc.wantIP != "" && st.GetNetwork().GetIp() != tc.wantIP {
				t.Fatalf("IP = %q, want %q", st.GetNetwork().GetIp(), tc.wantIP)
			}
			if st.GetRuntimeHandler() != tc.handler {
				t.Fatalf("handler = %q, want %q", st.GetRuntimeHandler(), tc.handler)
			}
		})
	}
	_, err := e.rc.RunPodSandbox(e.ctx, &runtimeapi.RunPodSandboxRequest{Config: hostNet})
	wantCode(t, err, codes.AlreadyExists)
}

func TestContainerLifecycle(t *testing.T) {
	e := start(t)
	sb := e.runSandbox(t, "web", nil)
	id := e.createContainer(t, sb, "app", map[string]string{"tier": "front"})
	st := e.containerStatus(t, id)
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_CREATED || st.GetLogPath() != "/var/log/pods/default_web/app/0.log" ||
		len(st.GetMounts()) != 1 || st.GetImage().GetImage() != testImage || !strings.HasPrefix(st.GetImageId(), "sha256:") ||
		!strings.HasPrefix(st.GetImageRef(), "registry.example.com/app@sha256:") {
		t.Fatalf("unexpected created status %v", st)
	}
	_, err := e.rc.CreateContainer(e.ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("app", nil)})
	wantCode(t, err, codes.AlreadyExists)

	e.clock.Step(time.Second)
	if _, err := e.rc.StartContainer(e.ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	st = e.containerStatus(t, id)
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING || st.GetStartedAt() != e.clock.Now().UnixNano() {
		t.Fatalf("unexpected running status %v", st)
	}
	_, err = e.rc.StartContainer(e.ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	wantCode(t, err, codes.FailedPrecondition)

	for i := range 2 { // stopping an exited container is a no-op
		if _, err := e.rc.StopContainer(e.ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 10}); err != nil {
			t.Fatalf("StopContainer #%d: %v", i, err)
		}
	}
	st = e.containerStatus(t, id)
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != 143 || st.GetReason() != "Error" {
		t.Fatalf("unexpected stopped status %v", st)
	}
	for i := range 2 { // removing a removed container succeeds
		if _, err := e.rc.RemoveContainer(e.ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
			t.Fatalf("RemoveContainer #%d: %v", i, err)
		}
	}
	_, err = e.rc.ContainerStatus(e.ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	wantCode(t, err, codes.NotFound)
}

func TestStopPodSandboxKillsContainers(t *testing.T) {
	e := start(t)
	sb := e.runSandbox(t, "web", nil)
	running := e.startContainer(t, sb, "app")
	created := e.createContainer(t, sb, "idle", nil)
	if _, err := e.rc.StopPodSandbox(e.ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if st := e.containerStatus(t, running); st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != 137 {
		t.Fatalf("running container after sandbox stop: %v", st)
	}
	if st := e.containerStatus(t, created); st.GetState() != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("created container after sandbox stop: %v", st)
	}
	_, err := e.rc.CreateContainer(e.ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("late", nil)})
	wantCode(t, err, codes.FailedPrecondition)
	if _, err := e.rc.RemovePodSandbox(e.ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	if n := len(e.rt.Containers()); n != 0 {
		t.Fatalf("%d containers left after sandbox removal", n)
	}
}

func TestExitAfter(t *testing.T) {
	tests := []struct {
		name       string
		behaviour  fake.Behaviour
		wantCode   int32
		wantReason string
	}{
		{name: "completed", behaviour: fake.Behaviour{ExitAfter: 5 * time.Second}, wantReason: "Completed"},
		{name: "error", behaviour: fake.Behaviour{ExitAfter: 5 * time.Second, ExitCode: 2}, wantCode: 2, wantReason: "Error"},
		{name: "oom", behaviour: fake.Behaviour{ExitAfter: 5 * time.Second, ExitCode: 137, Reason: "OOMKilled"}, wantCode: 137, wantReason: "OOMKilled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t)
			e.rt.ScriptContainer("job", tc.behaviour)
			id := e.startContainer(t, e.runSandbox(t, "pod", nil), "job")
			e.clock.Step(4 * time.Second)
			if st := e.containerStatus(t, id); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
				t.Fatalf("container exited early: %v", st)
			}
			e.clock.Step(time.Second)
			st := e.eventuallyExited(t, id)
			if st.GetExitCode() != tc.wantCode || st.GetReason() != tc.wantReason {
				t.Fatalf("exit = %d/%q, want %d/%q", st.GetExitCode(), st.GetReason(), tc.wantCode, tc.wantReason)
			}
			if st.GetFinishedAt() != e.clock.Now().UnixNano() {
				t.Fatalf("finishedAt %d, want %d", st.GetFinishedAt(), e.clock.Now().UnixNano())
			}
		})
	}
}

func TestStartError(t *testing.T) {
	e := start(t)
	e.rt.ScriptContainer("bad", fake.Behaviour{StartError: "exec: \"/app\": no such file"})
	id := e.createContainer(t, e.runSandbox(t, "pod", nil), "bad", nil)
	_, err := e.rc.StartContainer(e.ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("StartContainer error = %v", err)
	}
	st := e.containerStatus(t, id)
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != 128 ||
		st.GetReason() != "StartError" || !strings.Contains(st.GetMessage(), "no such file") {
		t.Fatalf("unexpected status %v", st)
	}
}

func TestCreateContainerErrors(t *testing.T) {
	e := start(t)
	sb := e.runSandbox(t, "pod", nil)
	e.rt.ScriptContainer("broken", fake.Behaviour{CreateError: "mount failed"})
	missingImage := containerConfig("app", nil)
	missingImage.Image = &runtimeapi.ImageSpec{Image: "registry.example.com/missing:1"}
	tests := []struct {
		name    string
		req     *runtimeapi.CreateContainerRequest
		code    codes.Code
		message string
	}{
		{name: "scripted", req: &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("broken", nil)}, code: codes.Unknown, message: "mount failed"},
		{name: "missing image", req: &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: missingImage}, code: codes.NotFound, message: "image not found"},
		{name: "missing sandbox", req: &runtimeapi.CreateContainerRequest{PodSandboxId: "nope", Config: containerConfig("app", nil)}, code: codes.NotFound},
		{name: "nil config", req: &runtimeapi.CreateContainerRequest{PodSandboxId: sb}, code: codes.InvalidArgument},
		{name: "no metadata", req: &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{Image: &runtimeapi.ImageSpec{Image: testImage}}}, code: codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.rc.CreateContainer(e.ctx, tc.req)
			wantCode(t, err, tc.code)
			if !strings.Contains(status.Convert(err).Message(), tc.message) {
				t.Fatalf("error %v does not mention %q", err, tc.message)
			}
		})
	}
	if n := len(e.rt.Containers()); n != 0 {
		t.Fatalf("%d containers created by failing calls", n)
	}
}

func TestStopContainerIgnoringSIGTERM(t *testing.T) {
	e := start(t)
	e.rt.ScriptContainer("stubborn", fake.Behaviour{IgnoreSIGTERM: true})
	id := e.startContainer(t, e.runSandbox(t, "pod", nil), "stubborn")
	begin := e.clock.Now()
	done := make(chan error, 1)
	go func() {
		_, err := e.rc.StopContainer(e.ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 30})
		done <- err
	}()
	gomega.NewWithT(t).Eventually(e.clock.HasWaiters).WithTimeout(waitLimit).Should(gomega.BeTrue())
	e.clock.Step(29 * time.Second)
	if st := e.containerStatus(t, id); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container stopped before the timeout: %v", st)
	}
	e.clock.Step(time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("StopContainer: %v", err)
		}
	case <-e.ctx.Done():
		t.Fatal("StopContainer did not return after the timeout elapsed")
	}
	st := e.containerStatus(t, id)
	if st.GetExitCode() != 137 || st.GetFinishedAt() != begin.Add(30*time.Second).UnixNano() {
		t.Fatalf("unexpected status %v", st)
	}
}

func TestStopContainerHonoursContext(t *testing.T) {
	e := start(t)
	e.rt.ScriptContainer("stubborn", fake.Behaviour{IgnoreSIGTERM: true})
	id := e.startContainer(t, e.runSandbox(t, "pod", nil), "stubborn")
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := e.rc.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 30})
		done <- err
	}()
	gomega.NewWithT(t).Eventually(e.clock.HasWaiters).WithTimeout(waitLimit).Should(gomega.BeTrue())
	cancel()
	wantCode(t, <-done, codes.Canceled)
	if st := e.containerStatus(t, id); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container stopped despite cancellation: %v", st)
	}
	if _, err := e.rc.StopContainer(e.ctx, &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StopContainer with timeout 0: %v", err)
	}
	if st := e.containerStatus(t, id); st.GetExitCode() != 137 {
		t.Fatalf("exit code after kill = %d, want 137", st.GetExitCode())
	}
}

func TestExitContainer(t *testing.T) {
	e := start(t)
	id := e.startContainer(t, e.runSandbox(t, "pod", nil), "app")
	if err := e.rt.ExitContainer(id, 1, ""); err != nil {
		t.Fatalf("ExitContainer: %v", err)
	}
	if st := e.containerStatus(t, id); st.GetExitCode() != 1 || st.GetReason() != "Error" {
		t.Fatalf("unexpected status %v", st)
	}
	if err := e.rt.ExitContainer(id, 0, ""); err == nil {
		t.Fatal("ExitContainer of an exited container succeeded")
	}
	if err := e.rt.ExitContainer("nope", 0, ""); err == nil {
		t.Fatal("ExitContainer of a missing container succeeded")
	}
}

func TestInjectError(t *testing.T) {
	e := start(t)
	version := func() error {
		_, err := e.rc.Version(e.ctx, &runtimeapi.VersionRequest{})
		return err
	}
	e.rt.InjectError("Version", errors.New("boom"))
	for range 2 {
		err := version()
		wantCode(t, err, codes.Unknown)
		if status.Convert(err).Message() != "boom" {
			t.Fatalf("message = %q", status.Convert(err).Message())
		}
	}
	e.rt.InjectError("Version", status.Error(codes.Unavailable, "down"))
	wantCode(t, version(), codes.Unavailable)
	e.rt.InjectError("Version", nil)
	wantCode(t, version(), codes.OK)

	e.rt.InjectErrorOnce("Version", status.Error(codes.ResourceExhausted, "once"))
	wantCode(t, version(), codes.ResourceExhausted)
	wantCode(t, version(), codes.OK)
}

func TestAssertCalls(t *testing.T) {
	e := start(t)
	e.rt.ResetCalls()
	sb := e.runSandbox(t, "pod", nil)
	e.startContainer(t, sb, "app")
	want := []string{"RunPodSandbox", "CreateContainer", "StartContainer"}
	if err := e.rt.AssertCalls(want); err != nil {
		t.Fatalf("AssertCalls: %v", err)
	}
	err := e.rt.AssertCalls([]string{"RunPodSandbox", "StartContainer"})
	if err == nil || !strings.Contains(err.Error(), "index 1") {
		t.Fatalf("AssertCalls mismatch error = %v", err)
	}
	e.rt.ResetCalls()
	if got := e.rt.Calls(); len(got) != 0 {
		t.Fatalf("calls after reset = %v", got)
	}
}

func TestListFilters(t *testing.T) {
	e := start(t)
	sbA := e.runSandbox(t, "a", map[string]string{"app": "a"})
	sbB := e.runSandbox(t, "b", map[string]string{"app": "b"})
	cA := e.startContainer(t, sbA, "one")
	cB := e.createContainer(t, sbB, "two", map[string]string{"tier": "db"})
	if _, err := e.rc.StopPodSandbox(e.ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sbB}); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	sandboxTests := []struct {
		name   string
		filter *runtimeapi.PodSandboxFilter
		want   []string
	}{
		{name: "all", want: []string{sbA, sbB}},
		{name: "id", filter: &runtimeapi.PodSandboxFilter{Id: sbB}, want: []string{sbB}},
		{name: "ready", filter: &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}, want: []string{sbA}},
		{name: "label", filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "b"}}, want: []string{sbB}},
		{name: "no match", filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "c"}}},
	}
	for _, tc := range sandboxTests {
		t.Run("sandbox "+tc.name, func(t *testing.T) {
			resp, err := e.rc.ListPodSandbox(e.ctx, &runtimeapi.ListPodSandboxRequest{Filter: tc.filter})
			if err != nil {
				t.Fatalf("ListPodSandbox: %v", err)
			}
			wantIDs(t, resp.GetItems(), tc.want)
		})
	}
	containerTests := []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
	}{
		{name: "all", want: []string{cA, cB}},
		{name: "id", filter: &runtimeapi.ContainerFilter{Id: cA}, want: []string{cA}},
		{name: "running", filter: &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}, want: []string{cA}},
		{name: "sandbox", filter: &runtimeapi.ContainerFilter{PodSandboxId: sbB}, want: []string{cB}},
		{name: "label", filter: &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"tier": "db"}}, want: []string{cB}},
	}
	for _, tc := range containerTests {
		t.Run("container "+tc.name, func(t *testing.T) {
			resp, err := e.rc.ListContainers(e.ctx, &runtimeapi.ListContainersRequest{Filter: tc.filter})
			if err != nil {
				t.Fatalf("ListContainers: %v", err)
			}
			wantIDs(t, resp.GetContainers(), tc.want)
		})
	}
}

func wantIDs[T interface{ GetId() string }](t *testing.T, items []T, want []string) {
	t.Helper()
	got := make([]string, 0, len(items))
	for _, it := range items {
		got = append(got, it.GetId())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("ids = %v, want %v", got, want)
	}
}

type event struct {
	id  string
	typ runtimeapi.ContainerEventType
}

func subscribe(t *testing.T, e *env) runtimeapi.RuntimeService_GetContainerEventsClient {
	t.Helper()
	stream, err := e.rc.GetContainerEvents(e.ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatalf("GetContainerEvents: %v", err)
	}
	return stream
}

func TestGetContainerEvents(t *testing.T) {
	e := start(t)
	streams := []runtimeapi.RuntimeService_GetContainerEventsClient{subscribe(t, e), subscribe(t, e)}
	gomega.NewWithT(t).Eventually(e.rt.EventSubscribers).WithTimeout(waitLimit).Should(gomega.Equal(2))

	sb := e.runSandbox(t, "pod", nil)
	c := e.startContainer(t, sb, "app")
	calls := []func() error{
		func() error {
			_, err := e.rc.StopContainer(e.ctx, &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 1})
			return err
		},
		func() error {
			_, err := e.rc.RemoveContainer(e.ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c})
			return err
		},
		func() error {
			_, err := e.rc.RemovePodSandbox(e.ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb})
			return err
		},
	}
	for i, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("call #%d: %v", i, err)
		}
	}
	want := []event{
		{sb, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{c, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
		{c, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		{c, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT},
	}
	for n, stream := range streams {
		for i, w := range want {
			ev, err := stream.Recv()
			if err != nil {
				t.Fatalf("stream %d event %d: %v", n, i, err)
			}
			if ev.GetContainerId() != w.id || ev.GetContainerEventType() != w.typ || ev.GetPodSandboxStatus().GetId() != sb {
				t.Fatalf("stream %d event %d = %s %v, want %s %v", n, i, ev.GetContainerId(), ev.GetContainerEventType(), w.id, w.typ)
			}
		}
	}
}

func TestImages(t *testing.T) {
	e := start(t)
	_, err := e.ic.PullImage(e.ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}})
	wantCode(t, err, codes.NotFound)
	if !regexp.MustCompile(`failed to pull and unpack image .*: not found`).MatchString(err.Error()) {
		t.Fatalf("pull error = %v", err)
	}

	_, err = e.ic.PullImage(e.ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: testImage}})
	wantCode(t, err, codes.NotFound) // present but not pullable

	e.rt.SetPullable("nginx:1.27", 5000)
	auth := &runtimeapi.AuthConfig{Username: "u", Password: "p"}
	resp, err := e.ic.PullImage(e.ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}, Auth: auth})
	if err != nil || !strings.HasPrefix(resp.GetImageRef(), "sha256:") {
		t.Fatalf("PullImage = %v, %v", resp, err)
	}
	auths := e.rt.PullAuths("docker.io/library/nginx:1.27")
	if len(auths) != 2 || auths[0] != nil || auths[1].GetUsername() != "u" {
		t.Fatalf("PullAuths = %v", auths)
	}

	st, err := e.ic.ImageStatus(e.ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: resp.GetImageRef()}})
	if err != nil || st.GetImage().GetSize() != 5000 || st.GetImage().GetRepoTags()[0] != "docker.io/library/nginx:1.27" {
		t.Fatalf("ImageStatus = %v, %v", st, err)
	}
	list, err := e.ic.ListImages(e.ctx, &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}}})
	if err != nil || len(list.GetImages()) != 1 {
		t.Fatalf("ListImages = %v, %v", list, err)
	}
	fsInfo, err := e.ic.ImageFsInfo(e.ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil || fsInfo.GetImageFilesystems()[0].GetUsedBytes().GetValue() != 6000 {
		t.Fatalf("ImageFsInfo = %v, %v", fsInfo, err)
	}

	for range 2 { // removing a missing image succeeds
		if _, err := e.ic.RemoveImage(e.ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}}); err != nil {
			t.Fatalf("RemoveImage: %v", err)
		}
	}
	st, err = e.ic.ImageStatus(e.ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}})
	if err != nil || st.GetImage() != nil {
		t.Fatalf("ImageStatus of removed image = %v, %v", st, err)
	}
}

func TestRuntimeStatusAndVersion(t *testing.T) {
	e := start(t, fake.WithVersion("containerd", "2.1.0"))
	v, err := e.rc.Version(e.ctx, &runtimeapi.VersionRequest{})
	if err != nil || v.GetRuntimeName() != "containerd" || v.GetRuntimeVersion() != "2.1.0" || v.GetRuntimeApiVersion() != "v1" {
		t.Fatalf("Version = %v, %v", v, err)
	}
	conditions := func() map[string]bool {
		resp, err := e.rc.Status(e.ctx, &runtimeapi.StatusRequest{})
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		out := map[string]bool{}
		for _, c := range resp.GetStatus().GetConditions() {
			out[c.GetType()] = c.GetStatus()
		}
		return out
	}
	if c := conditions(); !c[runtimeapi.RuntimeReady] || !c[runtimeapi.NetworkReady] {
		t.Fatalf("default conditions = %v", c)
	}
	e.rt.SetNetworkReady(false, "NetworkPluginNotReady", "cni not initialised")
	if c := conditions(); !c[runtimeapi.RuntimeReady] || c[runtimeapi.NetworkReady] {
		t.Fatalf("conditions = %v", c)
	}
	cfg, err := e.rc.RuntimeConfig(e.ctx, &runtimeapi.RuntimeConfigRequest{})
	if err != nil || cfg.GetLinux().GetCgroupDriver() != runtimeapi.CgroupDriver_CGROUPFS {
		t.Fatalf("RuntimeConfig = %v, %v", cfg, err)
	}
	_, err = e.rc.CheckpointContainer(e.ctx, &runtimeapi.CheckpointContainerRequest{})
	wantCode(t, err, codes.Unimplemented)
}

func TestExecSync(t *testing.T) {
	e := start(t)
	sb := e.runSandbox(t, "pod", nil)
	app := e.startContainer(t, sb, "app")
	probe := e.startContainer(t, sb, "probe")
	e.rt.SetExecResult("probe", []byte("ok"), nil, 1)
	tests := []struct {
		name     string
		id       string
		code     codes.Code
		exitCode int32
		stdout   string
	}{
		{name: "default", id: app},
		{name: "scripted", id: probe, exitCode: 1, stdout: "ok"},
		{name: "missing", id: "nope", code: codes.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := e.rc.ExecSync(e.ctx, &runtimeapi.ExecSyncRequest{ContainerId: tc.id, Cmd: []string{"true"}})
			wantCode(t, err, tc.code)
			if resp.GetExitCode() != tc.exitCode || string(resp.GetStdout()) != tc.stdout {
				t.Fatalf("ExecSync = %v", resp)
			}
		})
	}
	if err := e.rt.ExitContainer(app, 0, ""); err != nil {
		t.Fatalf("ExitContainer: %v", err)
	}
	_, err := e.rc.ExecSync(e.ctx, &runtimeapi.ExecSyncRequest{ContainerId: app, Cmd: []string{"true"}})
	wantCode(t, err, codes.FailedPrecondition)
}

func TestStats(t *testing.T) {
	e := start(t)
	sb := e.runSandbox(t, "pod", nil)
	e.startContainer(t, sb, "app")
	e.createContainer(t, sb, "idle", nil)
	cs, err := e.rc.ListContainerStats(e.ctx, &runtimeapi.ListContainerStatsRequest{})
	if err != nil || len(cs.GetStats()) != 1 || cs.GetStats()[0].GetMemory().GetWorkingSetBytes().GetValue() == 0 {
		t.Fatalf("ListContainerStats = %v, %v", cs, err)
	}
	ps, err := e.rc.ListPodSandboxStats(e.ctx, &runtimeapi.ListPodSandboxStatsRequest{})
	if err != nil || len(ps.GetStats()) != 1 || len(ps.GetStats()[0].GetLinux().GetContainers()) != 1 {
		t.Fatalf("ListPodSandboxStats = %v, %v", ps, err)
	}
}

func TestSnapshotsAreCopies(t *testing.T) {
	e := start(t)
	sb := e.runSandbox(t, "pod", map[string]string{"app": "x"})
	e.rt.Sandboxes()[0].Labels["app"] = "changed"
	if got := e.sandboxStatus(t, sb).GetLabels()["app"]; got != "x" {
		t.Fatalf("snapshot mutation leaked: label = %q", got)
	}
}

func TestStopTwice(t *testing.T) {
	rt := fake.New()
	path := socketPath(t)
	if _, err := rt.Start(path); err != nil {
		t.Fatalf("Start: %v", err)
	}
	rt.Stop()
	rt.Stop()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket still present after Stop: %v", err)
	}
}
