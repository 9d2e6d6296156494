package imagegc

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const gib = 1 << 30

type img struct {
	name string
	size uint64
}

func TestNewValidatesPolicy(t *testing.T) {
	cases := []struct {
		name string
		p    Policy
		want string
	}{
		{"defaults", defaultPolicy(), ""},
		{"low equal to high", Policy{HighThresholdPercent: 50, LowThresholdPercent: 50}, ""},
		{"high above 100", Policy{HighThresholdPercent: 101}, "invalid HighThresholdPercent 101, must be in range [0-100]"},
		{"high negative", Policy{HighThresholdPercent: -1}, "invalid HighThresholdPercent -1, must be in range [0-100]"},
		{"low above 100", Policy{HighThresholdPercent: 100, LowThresholdPercent: 101}, "invalid LowThresholdPercent 101, must be in range [0-100]"},
		{"low above high", Policy{HighThresholdPercent: 80, LowThresholdPercent: 85}, "LowThresholdPercent 85 can not be higher than HighThresholdPercent 80"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{Runtime: newFakeRuntime(), Policy: tc.p})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("New error = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := New(Options{Policy: defaultPolicy()}); err == nil {
		t.Error("New without a runtime succeeded")
	}
}

func TestThresholds(t *testing.T) {
	const notEnough = "Insufficient free disk space on the node's image filesystem (90% of 100.0 GiB used). " +
		"Failed to free sufficient space by deleting unused images (freed 1073741824 bytes). " +
		"Investigate disk usage, as it could be used by active images, logs, volumes, or other data."
	cases := []struct {
		name                string
		capacity, available int64
		high, low           int
		images              []img
		wantRemoved         []string
		wantErr, wantEvent  string
	}{
		{name: "below the high threshold nothing is removed", capacity: 1000, available: 160, high: 85, low: 80,
			images: []img{{"a", 30}}},
		{name: "usage is 100 minus the truncated available percent: 84.9% is 85%", capacity: 1000, available: 151, high: 85, low: 80,
			images: []img{{"a", 30}, {"b", 30}, {"c", 30}}, wantRemoved: []string{"a", "b"}}, // frees 200-151 = 49
		{name: "above the high threshold frees down to the low one", capacity: 1000, available: 100, high: 85, low: 80,
			images: []img{{"a", 60}, {"b", 60}, {"c", 60}}, wantRemoved: []string{"a", "b"}}, // frees 100
		{name: "stops once enough is freed", capacity: 1000, available: 100, high: 85, low: 80,
			images: []img{{"a", 100}, {"b", 60}}, wantRemoved: []string{"a"}},
		{name: "not enough to free records FreeDiskSpaceFailed", capacity: 100 * gib, available: 10 * gib, high: 85, low: 80,
			images: []img{{"a", gib}}, wantRemoved: []string{"a"},
			wantErr: notEnough, wantEvent: "Warning FreeDiskSpaceFailed " + notEnough},
		{name: "available above capacity counts as capacity", capacity: 1000, available: 5000, high: 1, low: 0,
			images: []img{{"a", 30}}},
		{name: "high 0 removes an image on every pass, even with nothing to free", capacity: 1000, available: 1000, high: 0, low: 0,
			images: []img{{"a", 30}, {"b", 30}}, wantRemoved: []string{"a"}},
		{name: "high 100 collects only on a full filesystem", capacity: 1000, available: 0, high: 100, low: 90,
			images: []img{{"a", 60}, {"b", 60}, {"c", 60}}, wantRemoved: []string{"a", "b"}},
		{name: "capacity 0 is invalid", capacity: 0, available: 0, high: 85, low: 80, images: []img{{"a", 30}},
			wantErr: "invalid capacity 0 on image filesystem", wantEvent: "Warning InvalidDiskCapacity invalid capacity 0 on image filesystem"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Policy{HighThresholdPercent: tc.high, LowThresholdPercent: tc.low, MinAge: 2 * time.Minute})
			h.fs.capacity, h.fs.available = tc.capacity, tc.available
			for i, im := range tc.images {
				h.clock.SetTime(t0.Add(time.Duration(i) * time.Second)) // detected in order
				h.rt.addImage(im.name, im.size)
				h.detect(t)
			}
			h.clock.SetTime(t0.Add(10 * time.Minute))
			err := h.gc()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Fatalf("GarbageCollect error = %v, want %q", err, tc.wantErr)
			}
			if got := h.rt.removedNames(); !slices.Equal(got, tc.wantRemoved) {
				t.Errorf("removed %v, want %v", got, tc.wantRemoved)
			}
			events := h.drainEvents()
			if tc.wantEvent == "" && len(events) > 0 || tc.wantEvent != "" && !slices.Equal(events, []string{tc.wantEvent}) {
				t.Errorf("events %q, want %q", events, tc.wantEvent)
			}
			if got := h.collected(ReasonSpace); got != float64(len(tc.wantRemoved)) {
				t.Errorf("kubelet_image_garbage_collected_total{reason=space} = %v, want %d", got, len(tc.wantRemoved))
			}
			if h.fs.paths[0] != mountpoint {
				t.Errorf("statfs of %q, want the runtime's image filesystem mountpoint", h.fs.paths[0])
			}
		})
	}
}

// TestEvictionOrder: least recently used first; never used before used; ties by first detection.
func TestEvictionOrder(t *testing.T) {
	cases := []struct {
		name        string
		available   int64 // of 1000 bytes; each image is 10 bytes
		wantRemoved []string
	}{
		{"one image", 200, []string{"c"}},
		{"two images", 190, []string{"c", "d"}},
		{"all", 0, []string{"c", "d", "a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Policy{HighThresholdPercent: 80, LowThresholdPercent: 79, MinAge: 2 * time.Minute})
			h.fs.capacity, h.fs.available = 1000, tc.available // frees 210 - available
			// t0: a (in use by a running container) and b. t0+1m: c appears; b is used by an exited
			// container, a no longer. t0+2m: d appears; nothing is used.
			h.rt.addImage("a", 10)
			h.rt.addImage("b", 10)
			h.rt.use("a", runtimeapi.ContainerState_CONTAINER_RUNNING)
			h.detect(t)
			h.clock.SetTime(t0.Add(time.Minute))
			h.rt.addImage("c", 10)
			h.rt.stopUsingAll()
			h.rt.use("b", runtimeapi.ContainerState_CONTAINER_EXITED)
			h.detect(t)
			h.clock.SetTime(t0.Add(2 * time.Minute))
			h.rt.addImage("d", 10)
			h.rt.stopUsingAll()
			h.detect(t)
			h.clock.SetTime(t0.Add(10 * time.Minute))
			err := h.gc()
			if tc.available == 0 && err == nil {
				t.Error("freeing 210 bytes of 40 succeeded")
			} else if tc.available > 0 && err != nil {
				t.Fatal(err)
			}
			if got := h.rt.removedNames(); !slices.Equal(got, tc.wantRemoved) {
				t.Errorf("removed %v, want %v", got, tc.wantRemoved)
			}
		})
	}
}

// TestNeverRemoved: images in use (by running or exited containers, by image_id or, from older
// runtimes, image_ref), pinned images and the sandbox image are never removed.
func TestNeverRemoved(t *testing.T) {
	h := newHarness(t, Policy{HighThresholdPercent: 1, LowThresholdPercent: 0}, func(o *Options) {
		o.SandboxImage = "registry.k8s.io/pause:3.10"
	})
	h.fs.capacity, h.fs.available = 1000, 0
	h.rt.addImage("running", 10)
	h.rt.addImage("exited", 10)
	h.rt.addImage("byref", 10)
	h.rt.addImage("pinned", 10, func(i *runtimeapi.Image) { i.Pinned = true })
	h.rt.addImage("pause", 10, func(i *runtimeapi.Image) { i.RepoTags = []string{"registry.k8s.io/pause:3.10"} })
	h.rt.addImage("unused", 10)
	h.rt.use("running", runtimeapi.ContainerState_CONTAINER_RUNNING)
	h.rt.use("exited", runtimeapi.ContainerState_CONTAINER_EXITED)
	h.rt.containers = append(h.rt.containers, &runtimeapi.Container{Id: "old", ImageRef: id("byref"),
		State: runtimeapi.ContainerState_CONTAINER_CREATED})
	h.detect(t)
	h.clock.Step(time.Hour)
	if err := h.gc(); err == nil || !strings.Contains(err.Error(), "freed 10 bytes") {
		t.Fatalf("GarbageCollect error = %v, want FreeDiskSpaceFailed after freeing the one unused image", err)
	}
	if got := h.rt.removedNames(); !slices.Equal(got, []string{"unused"}) {
		t.Errorf("removed %v, want only the unused image", got)
	}
	if err := h.m.DeleteUnusedImages(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := h.rt.removedNames(); !slices.Equal(got, []string{"unused"}) {
		t.Errorf("DeleteUnusedImages removed %v, want nothing more", got)
	}
}

// TestMinimumAge: an image detected less than imageMinimumGCAge ago is kept; at exactly that age it goes.
func TestMinimumAge(t *testing.T) {
	cases := []struct {
		name   string
		after  time.Duration
		minAge time.Duration
		want   []string
	}{
		{"younger than the minimum age", 2*time.Minute - time.Second, 2 * time.Minute, nil},
		{"at the minimum age", 2 * time.Minute, 2 * time.Minute, []string{"new"}},
		{"minimum age 0, detected in the same pass", 0, 0, []string{"new"}},
		{"minimum age 1ns, detected in the same pass", 0, time.Nanosecond, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: tc.minAge})
			h.fs.capacity, h.fs.available = 1000, 100
			h.rt.addImage("new", 500)
			if tc.after > 0 {
				h.detect(t)
				h.clock.Step(tc.after)
			}
			_ = h.gc()
			if got := h.rt.removedNames(); !slices.Equal(got, tc.want) {
				t.Errorf("removed %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMaximumAge: with imageMaximumGCAge, images unused for longer go whatever the usage, once the
// Manager has run for that long.
func TestMaximumAge(t *testing.T) {
	const maxAge = 10 * time.Minute
	cases := []struct {
		name string
		at   time.Duration // after t0, when the Manager began
		want []string
	}{
		{"not before maxAge since the start", maxAge, nil},
		{"unused images older than maxAge", maxAge + time.Second, []string{"never", "old"}},
		{"and later the recently used one", 15*time.Minute + time.Second, []string{"never", "old", "recent"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute, MaxAge: maxAge})
			h.fs.capacity, h.fs.available = 1000, 1000 // empty: no space pass
			h.rt.addImage("never", 10)
			h.rt.addImage("old", 10)
			h.rt.addImage("recent", 10)
			h.rt.addImage("inuse", 10)
			h.rt.use("old", runtimeapi.ContainerState_CONTAINER_EXITED)
			h.rt.use("recent", runtimeapi.ContainerState_CONTAINER_RUNNING)
			h.rt.use("inuse", runtimeapi.ContainerState_CONTAINER_RUNNING)
			h.detect(t) // t0: old last used
			h.clock.Step(5 * time.Minute)
			h.rt.stopUsingAll()
			h.rt.use("recent", runtimeapi.ContainerState_CONTAINER_RUNNING)
			h.rt.use("inuse", runtimeapi.ContainerState_CONTAINER_RUNNING)
			h.detect(t) // t0+5m: recent last used
			h.rt.stopUsingAll()
			h.rt.use("inuse", runtimeapi.ContainerState_CONTAINER_RUNNING)
			h.clock.SetTime(t0.Add(tc.at))
			if err := h.gc(); err != nil {
				t.Fatal(err)
			}
			if got := h.rt.removedNames(); !slices.Equal(got, tc.want) {
				t.Errorf("removed %v, want %v", got, tc.want)
			}
			if got := h.collected(ReasonAge); got != float64(len(tc.want)) {
				t.Errorf("kubelet_image_garbage_collected_total{reason=age} = %v, want %d", got, len(tc.want))
			}
		})
	}
}

// TestRemoveErrors: a removal that fails does not stop the others; the pass fails naming it, and only
// the removed images are counted.
func TestRemoveErrors(t *testing.T) {
	t.Run("space", func(t *testing.T) {
		h := newHarness(t, defaultPolicy())
		h.fs.capacity, h.fs.available = 1000, 100
		h.rt.addImage("a", 60)
		h.rt.addImage("b", 60)
		h.rt.addImage("c", 60)
		h.rt.removeErr[id("a")] = errors.New("image is busy")
		h.detect(t)
		h.clock.Step(time.Hour)
		err := h.gc()
		want := "wanted to free 100 bytes, but freed 120 bytes space with errors in image deletion: image is busy"
		if err == nil || err.Error() != want {
			t.Fatalf("GarbageCollect error = %v, want %q", err, want)
		}
		if got := h.rt.removedNames(); !slices.Equal(got, []string{"b", "c"}) {
			t.Errorf("removed %v, want b and c", got)
		}
		if got := h.collected(ReasonSpace); got != 2 {
			t.Errorf("space count = %v, want 2", got)
		}
		if events := h.drainEvents(); len(events) > 0 {
			t.Errorf("events %q: a failed removal is no FreeDiskSpaceFailed", events)
		}
	})
	t.Run("age", func(t *testing.T) {
		h := newHarness(t, Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MaxAge: time.Minute})
		h.rt.addImage("a", 60)
		h.rt.addImage("b", 60)
		h.rt.removeErr[id("b")] = errors.New("read-only file system")
		h.detect(t)
		h.clock.Step(time.Hour)
		err := h.gc()
		want := "wanted to free images older than 1m0s, encountered errors in image deletion: read-only file system"
		if err == nil || err.Error() != want {
			t.Fatalf("GarbageCollect error = %v, want %q", err, want)
		}
		if got := h.rt.removedNames(); !slices.Equal(got, []string{"a"}) {
			t.Errorf("removed %v, want a", got)
		}
	})
}

func TestImageFsStats(t *testing.T) {
	cases := []struct {
		name    string
		info    *runtimeapi.ImageFsInfoResponse
		fsErr   error
		wantErr string
		event   bool
	}{
		{name: "no image filesystem", info: &runtimeapi.ImageFsInfoResponse{}, wantErr: "imageFs information is unavailable"},
		{name: "no filesystem identifier", info: &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{}}},
			wantErr: "invalid capacity 0 on image filesystem", event: true},
		{name: "mountpoint unknown to this host", info: &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
			FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/elsewhere"}}}},
			wantErr: "invalid capacity 0 on image filesystem", event: true},
		{name: "statfs fails", fsErr: errors.New("permission denied"), wantErr: "get filesystem info: permission denied"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, defaultPolicy())
			if tc.info != nil {
				h.rt.fsInfo = tc.info
			}
			h.fs.err = tc.fsErr
			err := h.gc()
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("GarbageCollect error = %v, want %q", err, tc.wantErr)
			}
			if got := len(h.drainEvents()); got != map[bool]int{true: 1}[tc.event] {
				t.Errorf("%d events, want InvalidDiskCapacity: %v", got, tc.event)
			}
		})
	}
	// Only the first image filesystem counts: a second one (say, the container filesystem the runtime
	// also lists) is not added.
	h := newHarness(t, Policy{HighThresholdPercent: 50, LowThresholdPercent: 40})
	h.fs.capacity, h.fs.available = 1000, 600
	h.rt.fsInfo.ImageFilesystems = append(h.rt.fsInfo.ImageFilesystems, &runtimeapi.FilesystemUsage{
		FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: mountpoint}, UsedBytes: &runtimeapi.UInt64Value{Value: 900}})
	h.rt.fsInfo.ContainerFilesystems = h.rt.fsInfo.ImageFilesystems[1:]
	h.rt.addImage("a", 10)
	h.detect(t)
	h.clock.Step(time.Hour)
	if err := h.gc(); err != nil || len(h.rt.removedNames()) > 0 || len(h.fs.paths) != 1 {
		t.Errorf("at 40%% usage: err %v, removed %v, statfs %v; want nothing", err, h.rt.removedNames(), h.fs.paths)
	}
}

func TestStatfs(t *testing.T) {
	capacity, available, err := Statfs{}.Usage(t.TempDir())
	if err != nil || capacity <= 0 || available < 0 || available > capacity {
		t.Errorf("Usage = %d, %d, %v", capacity, available, err)
	}
	if _, _, err := (Statfs{}).Usage("/no/such/dir"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Usage of a missing path: %v, want ErrNotExist", err)
	}
}

func TestFormatSize(t *testing.T) {
	for in, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 10 * 1 << 20: "10.0 MiB",
		100 * gib: "100.0 GiB", 28346784972: "26.4 GiB", 5 << 40: "5.0 TiB", 1 << 62: "4.0 EiB",
	} {
		if got := formatSize(in); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestMetricName(t *testing.T) {
	h := newHarness(t, defaultPolicy())
	h.m.metrics.collected.WithLabelValues(ReasonSpace).Inc()
	const want = `
# HELP kubelet_image_garbage_collected_total Total number of images garbage collected by the kubelet, whether through disk usage or image age.
# TYPE kubelet_image_garbage_collected_total counter
kubelet_image_garbage_collected_total{reason="space"} 1
`
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "kubelet_image_garbage_collected_total"); err != nil {
		t.Error(err)
	}
}
