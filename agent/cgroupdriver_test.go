package agent

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/runtime"
)

type askRuntimeConfig struct {
	driver runtimeapi.CgroupDriver
	err    error
}

func (a askRuntimeConfig) RuntimeConfig(context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	if a.err != nil {
		return nil, a.err
	}
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: a.driver}}, nil
}

// The runtime's cgroup driver wins over the configuration's; without an answer the configuration's stays.
// The caller's configuration is never changed.
func TestCgroupDriverFromRuntime(t *testing.T) {
	for _, tc := range []struct {
		ask  askRuntimeConfig
		want string
	}{
		{askRuntimeConfig{driver: runtimeapi.CgroupDriver_SYSTEMD}, "systemd"},
		{askRuntimeConfig{driver: runtimeapi.CgroupDriver_CGROUPFS}, "cgroupfs"},
		{askRuntimeConfig{err: fmt.Errorf("old containerd: %w", runtime.ErrUnimplemented)}, "cgroupfs"},
		{askRuntimeConfig{err: errors.New("connection refused")}, "cgroupfs"},
	} {
		cfg := config.Default("node-a")
		cfg.Kubelet.CgroupDriver = "cgroupfs"
		a := &Agent{cfg: cfg, log: logr.Discard()}
		(host{}).cgroupDriverFromRuntime(context.Background(), a, tc.ask)
		if a.cfg.Kubelet.CgroupDriver != tc.want {
			t.Errorf("%+v: driver %q, want %q", tc.ask, a.cfg.Kubelet.CgroupDriver, tc.want)
		}
		if cfg.Kubelet.CgroupDriver != "cgroupfs" {
			t.Errorf("%+v: the caller's configuration was changed", tc.ask)
		}
	}
}

type fsInfo string

func (f fsInfo) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{
		{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: string(f)}}}}, nil
}

// The image filesystem is dedicated when it is another device than the root dir's.
func TestDiskInfo(t *testing.T) {
	dir := t.TempDir()
	if d, err := (diskInfo{rootDir: dir, cri: fsInfo(dir)}).HasDedicatedImageFs(context.Background()); err != nil || d {
		t.Errorf("same directory: dedicated %v, %v", d, err)
	}
	if d, err := (diskInfo{rootDir: dir, cri: fsInfo("/proc")}).HasDedicatedImageFs(context.Background()); err != nil || !d {
		t.Errorf("/proc: dedicated %v, %v", d, err)
	}
}
