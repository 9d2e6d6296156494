package runtime_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
)

func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cri")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "cri.sock")
}

func startFake(t *testing.T, opts ...fake.Option) (*fake.Runtime, string) {
	t.Helper()
	rt := fake.New(opts...)
	ep, err := rt.Start(socketPath(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Stop)
	return rt, ep
}

func dial(t *testing.T, ep string, opts runtime.Options) *runtime.Client {
	t.Helper()
	c, err := runtime.Dial(ep, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func sandboxConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: name + "-uid"},
		LogDirectory: "/var/log/pods/default_" + name,
	}
}

func TestLifecycleThroughTheClient(t *testing.T) {
	rt, ep := startFake(t)
	rt.AddImage("docker.io/library/busybox:latest", 1<<20)
	c := dial(t, ep, runtime.Options{})
	ctx := context.Background()

	v, err := c.Version(ctx)
	if err != nil || v.RuntimeName != "fake-runtime" {
		t.Fatalf("Version = %v, %v", v, err)
	}
	sbConfig := sandboxConfig("web")
	sb, err := c.RunPodSandbox(ctx, sbConfig, "")
	if err != nil {
		t.Fatal(err)
	}
	ctrID, err := c.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:latest"},
		LogPath:  "app/0.log",
	}, sbConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartContainer(ctx, ctrID); err != nil {
		t.Fatal(err)
	}
	st, err := c.ContainerStatus(ctx, ctrID, false)
	if err != nil || st.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("ContainerStatus = %v, %v", st, err)
	}
	if err := c.StopContainer(ctx, ctrID, 10); err != nil {
		t.Fatal(err)
	}
	st, err = c.ContainerStatus(ctx, ctrID, false)
	if err != nil || st.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Status.ExitCode != 143 {
		t.Fatalf("after stop: %v, %v", st, err)
	}
	ctrs, err := c.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sb})
	if err != nil || len(ctrs) != 1 {
		t.Fatalf("ListContainers = %v, %v", ctrs, err)
	}
	if err := c.StopPodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := c.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := rt.AssertCalls([]string{"Version", "RunPodSandbox", "CreateContainer", "StartContainer",
		"ContainerStatus", "StopContainer", "ContainerStatus", "ListContainers", "StopPodSandbox",
		"RemovePodSandbox"}); err != nil {
		t.Fatal(err)
	}
}

func TestErrorsMapToSentinels(t *testing.T) {
	rt, ep := startFake(t)
	c := dial(t, ep, runtime.Options{})
	ctx := context.Background()

	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"missing sandbox", func() error { _, err := c.PodSandboxStatus(ctx, "nope", false); return err }, runtime.ErrNotFound},
		{"missing image", func() error {
			_, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "example.com/missing:1"}, nil, nil)
			return err
		}, runtime.ErrNotFound},
		{"injected unavailable", func() error {
			rt.InjectErrorOnce("Status", status.Error(codes.Unavailable, "restarting"))
			_, err := c.Status(ctx, false)
			return err
		}, runtime.ErrUnavailable},
		{"injected unknown", func() error {
			rt.InjectErrorOnce("ListImages", errors.New("disk on fire"))
			_, err := c.ListImages(ctx, nil)
			return err
		}, runtime.ErrRuntime},
		{"unimplemented", func() error {
			_, err := c.ListPodSandbox(ctx, nil) // fine
			if err != nil {
				return err
			}
			rt.InjectErrorOnce("RuntimeConfig", status.Error(codes.Unimplemented, "not in 1.6"))
			_, err = c.RuntimeConfig(ctx)
			return err
		}, runtime.ErrUnimplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestUnreachableRuntimeIsUnavailable(t *testing.T) {
	c := dial(t, "unix://"+socketPath(t), runtime.Options{Timeout: time.Second})
	_, err := c.Version(context.Background())
	if !errors.Is(err, runtime.ErrUnavailable) && !errors.Is(err, runtime.ErrDeadlineExceeded) {
		t.Fatalf("err = %v, want unavailable", err)
	}
}

func TestPerRPCTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	rt, ep := startFake(t, fake.WithClock(clk))
	rt.AddImage("busybox", 1)
	rt.ScriptContainer("stubborn", fake.Behaviour{IgnoreSIGTERM: true})
	c := dial(t, ep, runtime.Options{Timeout: 50 * time.Millisecond})
	ctx := context.Background()
	sb, err := c.RunPodSandbox(ctx, sandboxConfig("slow"), "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "stubborn"}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The fake clock never reaches the stop timeout: the RPC must end at timeout + stop timeout.
	start := time.Now()
	err = c.StopContainer(ctx, id, 1)
	if !errors.Is(err, runtime.ErrDeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("StopContainer gave up after %v, before its 1 s grace", d)
	}
}

// brokenRuntime answers Version with missing fields and RunPodSandbox with no ID.
type brokenRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (brokenRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "broken"}, nil
}

func (brokenRuntime) RunPodSandbox(context.Context, *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	return &runtimeapi.RunPodSandboxResponse{}, nil
}

func TestResponseInvariants(t *testing.T) {
	path := socketPath(t)
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, brokenRuntime{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	c := dial(t, path, runtime.Options{}) // a bare path is accepted, as by the kubelet
	if _, err := c.Version(context.Background()); !errors.Is(err, runtime.ErrInvalidResponse) {
		t.Fatalf("Version err = %v, want invalid response", err)
	}
	if _, err := c.RunPodSandbox(context.Background(), sandboxConfig("x"), ""); !errors.Is(err, runtime.ErrInvalidResponse) {
		t.Fatalf("RunPodSandbox err = %v, want invalid response", err)
	}
	if _, err := c.Status(context.Background(), false); !errors.Is(err, runtime.ErrUnimplemented) {
		t.Fatalf("Status err = %v, want unimplemented", err)
	}
}

func TestEndpointValidation(t *testing.T) {
	for _, ep := range []string{"tcp://127.0.0.1:1234", "unix://", "relative/path.sock"} {
		if _, err := runtime.Dial(ep, runtime.Options{}); err == nil {
			t.Errorf("Dial(%q) succeeded, want an error", ep)
		}
	}
}

func TestWaitForRuntimeRetriesUntilTheRuntimeStarts(t *testing.T) {
	path := socketPath(t)
	c := dial(t, "unix://"+path, runtime.Options{Timeout: time.Second})
	clk := clocktesting.NewFakeClock(time.Now())
	done := make(chan *runtimeapi.VersionResponse, 1)
	go func() {
		v, err := runtime.WaitForRuntime(context.Background(), c, clk, runtime.DefaultBackoff)
		if err != nil {
			t.Error(err)
		}
		done <- v
	}()
	// Two failed attempts, each followed by a back-off wait on the fake clock.
	for range 2 {
		waitForWaiter(t, clk)
		clk.Step(runtime.DefaultBackoff.Max)
	}
	rt := fake.New()
	if _, err := rt.Start(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Stop)
	for {
		select {
		case v := <-done:
			if v.RuntimeName != "fake-runtime" {
				t.Fatalf("version = %v", v)
			}
			return
		case <-time.After(10 * time.Millisecond):
			if clk.HasWaiters() {
				clk.Step(runtime.DefaultBackoff.Max)
			}
		}
	}
}

func TestWaitForRuntimeStopsWithContext(t *testing.T) {
	c := dial(t, "unix://"+socketPath(t), runtime.Options{Timeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := runtime.WaitForRuntime(ctx, c, clocktesting.NewFakeClock(time.Now()), runtime.DefaultBackoff); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
}

func waitForWaiter(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("nothing waits on the clock")
		}
		time.Sleep(time.Millisecond) // polling a condition with a bound, not waiting for time to pass
	}
}

func TestMetricsUseKubeletOperationNames(t *testing.T) {
	_, ep := startFake(t)
	reg := prometheus.NewRegistry()
	c := dial(t, ep, runtime.Options{Metrics: runtime.NewMetrics(reg)})
	if _, err := c.RunPodSandbox(context.Background(), sandboxConfig("m"), ""); err != nil {
		t.Fatal(err)
	}
	_, _ = c.PodSandboxStatus(context.Background(), "missing", false)
	n, err := testutil.GatherAndCount(reg, "kubelet_runtime_operations_total")
	if err != nil || n != 2 {
		t.Fatalf("series = %d, %v", n, err)
	}
	if err := testutil.GatherAndCompare(reg, stringsReader(`
# HELP kubelet_runtime_operations_errors_total Cumulative number of runtime operation errors by operation type.
# TYPE kubelet_runtime_operations_errors_total counter
kubelet_runtime_operations_errors_total{operation_type="podsandbox_status"} 1
`), "kubelet_runtime_operations_errors_total"); err != nil {
		t.Fatal(err)
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
