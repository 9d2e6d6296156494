package agent

import (
	"context"
	"errors"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
)

// cgroupDriverTimeout bounds the start-up question to the runtime: a runtime that is not up yet leaves the
// configured driver.
const cgroupDriverTimeout = 5 * time.Second

// runtimeConfigAsker is the CRI call the cgroup driver discovery makes.
type runtimeConfigAsker interface {
	RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error)
}

// cgroupDriverFromRuntime is the kubelet's KubeletCgroupDriverFromCRI (GA): the runtime's cgroup driver
// (CRI RuntimeConfig) wins over cgroupDriver in the configuration. A runtime that does not implement the
// call (containerd 1.6) or does not answer in time leaves the configured driver, as the kubelet falls back.
func (host) cgroupDriverFromRuntime(ctx context.Context, a *Agent, cri runtimeConfigAsker) {
	ctx, cancel := context.WithTimeout(ctx, cgroupDriverTimeout)
	defer cancel()
	resp, err := cri.RuntimeConfig(ctx)
	switch {
	case errors.Is(err, runtime.ErrUnimplemented):
		a.log.Info("CRI implementation should be updated to support RuntimeConfig. Falling back to using cgroupDriver from kubelet config.")
		return
	case err != nil:
		a.log.Info("The runtime did not say its cgroup driver, using cgroupDriver from kubelet config", "err", err.Error(),
			"cgroupDriver", a.cfg.Kubelet.CgroupDriver)
		return
	}
	var driver string
	switch resp.GetLinux().GetCgroupDriver() {
	case runtimeapi.CgroupDriver_SYSTEMD:
		driver = "systemd"
	case runtimeapi.CgroupDriver_CGROUPFS:
		driver = "cgroupfs"
	default:
		return
	}
	a.log.Info("Using cgroup driver setting received from the CRI runtime", "cgroupDriver", driver)
	if driver != a.cfg.Kubelet.CgroupDriver {
		cfg := *a.cfg
		cfg.Kubelet.CgroupDriver = driver
		a.cfg = &cfg
	}
}
