package imagegc_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/imagegc"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
)

// fullFS is a 90% full filesystem wherever the runtime says its images are.
type fullFS struct{}

func (fullFS) Usage(string) (int64, int64, error) { return 1 << 30, 1 << 30 / 10, nil }

// TestThroughTheCRI runs a collection against the in-memory CRI runtime over gRPC: the image a container
// (exited) still uses stays, the unused one goes.
func TestThroughTheCRI(t *testing.T) {
	dir, err := os.MkdirTemp("", "cri")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	rt := fake.New(fake.WithClock(clk))
	ep, err := rt.Start(filepath.Join(dir, "cri.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Stop)
	c, err := runtime.Dial(ep, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rt.AddImage("docker.io/library/busybox:latest", 5<<20)
	rt.AddImage("registry.example/unused:1", 7<<20)
	ctx := context.Background()
	sbConfig := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "p-uid"}}
	sb, err := c.RunPodSandbox(ctx, sbConfig, "")
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := c.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:latest"},
	}, sbConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartContainer(ctx, ctr); err != nil {
		t.Fatal(err)
	}
	if err := c.StopContainer(ctx, ctr, 0); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	events := record.NewFakeRecorder(10)
	m, err := imagegc.New(imagegc.Options{Runtime: c, Filesystem: fullFS{}, Clock: clk, Recorder: events, NodeName: "n",
		Metrics: reg, Policy: imagegc.Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	began := clk.Now()
	if err := m.GarbageCollect(ctx, began); err == nil {
		t.Fatal("first pass: nothing is old enough, yet no FreeDiskSpaceFailed")
	}
	clk.Step(2 * time.Minute)
	err = m.GarbageCollect(ctx, began) // 7 MiB freed of ~102 MiB wanted
	if err == nil {
		t.Fatal("second pass freed what it needed, which the images cannot hold")
	}
	images, lerr := c.ListImages(ctx, nil)
	if lerr != nil {
		t.Fatal(lerr)
	}
	if len(images) != 1 || images[0].RepoTags[0] != "docker.io/library/busybox:latest" {
		t.Errorf("images left: %v, want busybox only", images)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kubelet_image_garbage_collected_total Total number of images garbage collected by the kubelet, whether through disk usage or image age.
# TYPE kubelet_image_garbage_collected_total counter
kubelet_image_garbage_collected_total{reason="space"} 1
`), "kubelet_image_garbage_collected_total"); err != nil {
		t.Error(err)
	}
	if len(events.Events) != 2 {
		t.Errorf("%d FreeDiskSpaceFailed events, want 2 (one a pass)", len(events.Events))
	}
}
