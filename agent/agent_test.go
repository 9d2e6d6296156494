package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/config"
)

func TestNewValidates(t *testing.T) {
	if _, err := New(context.Background(), Options{}); err == nil || !strings.Contains(err.Error(), "Config is required") {
		t.Errorf("New without a config: %v", err)
	}
	cfg := config.Default("node-a")
	cfg.RootDir = t.TempDir()
	cfg.Kubelet.MaxPods = -1
	if _, err := New(context.Background(), Options{Config: cfg}); err == nil || !strings.Contains(err.Error(), "maxPods") {
		t.Errorf("New with an invalid config: %v", err)
	}
}

// A cgroup filesystem that is not cgroup2 (any other directory statfs reports as such) is refused unless
// failCgroupV1 is false, with the kubelet's message.
func TestCheckCgroupVersion(t *testing.T) {
	notUnified := t.TempDir()
	kc := &config.Default("node-a").Kubelet
	if err := checkCgroupVersion(kc, notUnified); err == nil || !strings.Contains(err.Error(), "not run on a host using cgroup v1") {
		t.Errorf("failCgroupV1 by default on cgroup v1: %v", err)
	}
	off := false
	kc.FailCgroupV1 = &off
	if err := checkCgroupVersion(kc, notUnified); err != nil {
		t.Errorf("failCgroupV1 false: %v", err)
	}
	on := true
	kc.FailCgroupV1 = &on
	if err := checkCgroupVersion(kc, "/does/not/exist"); err == nil {
		t.Error("an unreadable cgroup root must be an error")
	}
}

func TestEventCacheSize(t *testing.T) {
	for _, c := range []struct {
		maxPods int32
		want    int
	}{{0, 1024}, {110, 1024}, {250, 2000}, {1000, 4096}} {
		if got := eventCacheSize(c.maxPods); got != c.want {
			t.Errorf("eventCacheSize(%d) = %d, want %d", c.maxPods, got, c.want)
		}
	}
}
