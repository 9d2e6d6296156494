package containergc_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/containergc"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// pods is a fixed answer of PodsForGC.
type pods map[types.UID]bool

func (p pods) PodsForGC(context.Context) (map[types.UID]bool, bool) { return maps.Clone(p), true }

// criPod runs a sandbox of pod name on the runtime, with nodelet's labels and log directory, and n attempts
// of its container "app", each exited (the last one left running when running is set); each attempt's log
// file is written as a runtime would. It returns the container IDs, oldest first.
func criPod(t *testing.T, c *runtime.Client, clk *clocktesting.FakeClock, logs, name string, n int, running bool) []string {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid")}}
	dir, err := podconfig.PodLogDir(logs, pod)
	if err != nil {
		t.Fatal(err)
	}
	sbConfig := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)},
		Labels:       podconfig.SandboxLabels(pod),
		LogDirectory: dir,
	}
	sb, err := c.RunPodSandbox(ctx, sbConfig, "")
	if err != nil {
		t.Fatal(err)
	}
	spec := &corev1.Container{Name: "app", Image: "docker.io/library/busybox:latest"}
	var ids []string
	for i := range n {
		clk.Step(time.Second) // attempts are told apart by their creation times
		file, err := podconfig.ContainerLogPath("app", i)
		if err != nil {
			t.Fatal(err)
		}
		id, err := c.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: uint32(i)}, Image: &runtimeapi.ImageSpec{Image: spec.Image},
			Labels: podconfig.ContainerLabels(pod, "app"), Annotations: podconfig.ContainerAnnotations(pod, spec, runtime.KindRegular, i),
			LogPath: file,
		}, sbConfig)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "app"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte("attempt\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := c.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		if i < n-1 || !running {
			if err := c.StopContainer(ctx, id, 0); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, id)
	}
	return ids
}

// TestThroughTheCRI runs a pass against the in-memory CRI runtime over gRPC: of a crash-looping pod the
// running attempt and the newest dead one stay with their log files, the older ones go with theirs; a
// deleted pod's containers, sandbox and log directory all go.
func TestThroughTheCRI(t *testing.T) {
	dir, err := os.MkdirTemp("", "cgc")
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
	rt.AddImage("docker.io/library/busybox:latest", 1<<20)
	logs := filepath.Join(dir, "pods")
	crash := criPod(t, c, clk, logs, "crash", 4, true)
	gone := criPod(t, c, clk, logs, "gone", 2, false)
	ctx := context.Background()
	sandboxes, err := c.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sandboxes {
		if sb.GetMetadata().GetName() == "gone" {
			if err := c.StopPodSandbox(ctx, sb.GetId()); err != nil {
				t.Fatal(err)
			}
		}
	}

	events := record.NewFakeRecorder(10)
	gc, err := containergc.New(containergc.Options{Runtime: c, Pods: pods{"crash-uid": false}, Clock: clk, Recorder: events,
		NodeName: "n", PodLogsDir: logs, Policy: containergc.Policy{MaxPerPodContainer: 1, MaxContainers: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := gc.GarbageCollect(ctx); err != nil {
		t.Fatal(err)
	}

	containers, err := c.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, ctr := range containers {
		left = append(left, ctr.GetId())
	}
	slices.Sort(left)
	want := slices.Sorted(slices.Values(crash[2:]))
	if !slices.Equal(left, want) {
		t.Errorf("containers left %v, want the crashing pod's last two %v (of %v; the deleted pod's %v)", left, want, crash, gone)
	}
	var files []string
	err = filepath.WalkDir(logs, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(logs, p)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if wantFiles := []string{"ns_crash_crash-uid/app/2.log", "ns_crash_crash-uid/app/3.log"}; !slices.Equal(files, wantFiles) {
		t.Errorf("log files left %v, want %v", files, wantFiles)
	}
	if _, err := os.Stat(filepath.Join(logs, "ns_gone_gone-uid")); !os.IsNotExist(err) {
		t.Errorf("the deleted pod's log directory: %v, want it gone", err)
	}
	sandboxes, err = c.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sandboxes) != 1 || sandboxes[0].GetMetadata().GetName() != "crash" {
		t.Errorf("sandboxes left %v, want the crashing pod's", sandboxes)
	}
	if len(events.Events) != 0 {
		t.Errorf("event %s", <-events.Events)
	}
}
