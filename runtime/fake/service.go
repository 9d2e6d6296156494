package fake

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criVersion is the CRI API version reported by Version.
const criVersion = "v1"

// Version reports the configured runtime name and version.
func (r *infoService) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	if err := r.begin("Version"); err != nil {
		return nil, err
	}
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       r.runtimeName,
		RuntimeVersion:    r.runtimeVersion,
		RuntimeApiVersion: criVersion,
	}, nil
}

// Status reports the RuntimeReady and NetworkReady conditions, the runtime
// handlers and features.
func (r *infoService) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	if err := r.begin("Status"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			r.runtimeCond.proto(runtimeapi.RuntimeReady),
			r.networkCond.proto(runtimeapi.NetworkReady),
		}},
		Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true},
	}
	for _, h := range r.handlers {
		resp.RuntimeHandlers = append(resp.RuntimeHandlers, &runtimeapi.RuntimeHandler{
			Name:     h,
			Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true, UserNamespaces: true},
		})
	}
	if req.GetVerbose() {
		resp.Info = map[string]string{"config": `{"fake":true}`}
	}
	return resp, nil
}

func (c condition) proto(typ string) *runtimeapi.RuntimeCondition {
	return &runtimeapi.RuntimeCondition{Type: typ, Status: c.ready, Reason: c.reason, Message: c.message}
}

// UpdateRuntimeConfig records the pod CIDR (see PodCIDR).
func (r *infoService) UpdateRuntimeConfig(_ context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	if err := r.begin("UpdateRuntimeConfig"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cidr := req.GetRuntimeConfig().GetNetworkConfig().GetPodCidr(); cidr != "" {
		r.podCIDR = cidr
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// RuntimeConfig reports the cgroupfs cgroup driver.
func (r *infoService) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	if err := r.begin("RuntimeConfig"); err != nil {
		return nil, err
	}
	return &runtimeapi.RuntimeConfigResponse{
		Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS},
	}, nil
}
