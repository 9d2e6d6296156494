package csi_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// tb is what the helpers need of a test (testing.T or GinkgoT()).
type tb interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// fakePlugin is a CSI plugin as a registrar and its driver make one: a registration server on one socket
// and the driver's Identity and Node services on another.
type fakePlugin struct {
	registerapi.UnimplementedRegistrationServer
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedNodeServer

	mu       sync.Mutex
	info     *registerapi.PluginInfo
	nodeID   string
	maxVols  int64
	topology map[string]string
	infoErr  error
	caps     []csipb.NodeServiceCapability_RPC_Type
	errs     map[string]error // method → error to answer with
	calls    map[string]int
	statuses []*registerapi.RegistrationStatus
	reqs     []any

	servers []*grpc.Server
}

// newFakePlugin is a CSIPlugin named name whose driver listens at <dir>/plugins/<name>/csi.sock, reporting
// node ID "node-1" and supporting CSI 1.0.0.
func newFakePlugin(t tb, dir, name string) *fakePlugin {
	t.Helper()
	endpoint := filepath.Join(dir, "plugins", name, "csi.sock")
	return &fakePlugin{
		info:   &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: name, Endpoint: endpoint, SupportedVersions: []string{"1.0.0"}},
		nodeID: "node-1", errs: map[string]error{}, calls: map[string]int{},
	}
}

// tempDir is a short directory (unix socket paths are limited to 108 bytes) removed after the test.
func tempDir(t tb) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// start serves the driver at its endpoint and the registration server at regSocket.
func (p *fakePlugin) start(t tb, regSocket string) {
	t.Helper()
	p.mu.Lock()
	endpoint := p.info.Endpoint
	p.mu.Unlock()
	drv := p.serve(t, endpoint, func(s *grpc.Server) {
		csipb.RegisterIdentityServer(s, p)
		csipb.RegisterNodeServer(s, p)
	})
	reg := p.serve(t, regSocket, func(s *grpc.Server) { registerapi.RegisterRegistrationServer(s, p) })
	p.mu.Lock()
	p.servers = append(p.servers, drv, reg)
	p.mu.Unlock()
	t.Cleanup(p.stop)
}

func (p *fakePlugin) serve(t tb, path string, register func(*grpc.Server)) *grpc.Server {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(path)
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go func() { _ = s.Serve(lis) }()
	return s
}

// stop stops both servers, which removes their sockets.
func (p *fakePlugin) stop() {
	p.mu.Lock()
	servers := p.servers
	p.servers = nil
	p.mu.Unlock()
	for _, s := range servers {
		s.Stop()
	}
}

func (p *fakePlugin) record(method string, req any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[method]++
	p.reqs = append(p.reqs, req)
	return p.errs[method]
}

func (p *fakePlugin) setErr(method string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs[method] = err
}

func (p *fakePlugin) callCount(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[method]
}

// lastStatus is the last registration status the plugin was told, or nil.
func (p *fakePlugin) lastStatus() *registerapi.RegistrationStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.statuses) == 0 {
		return nil
	}
	return p.statuses[len(p.statuses)-1]
}

func (p *fakePlugin) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.info
	return &registerapi.PluginInfo{Type: i.Type, Name: i.Name, Endpoint: i.Endpoint, SupportedVersions: slices.Clone(i.SupportedVersions)}, nil
}

func (p *fakePlugin) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.statuses = append(p.statuses, st)
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (p *fakePlugin) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &csipb.GetPluginInfoResponse{Name: p.info.Name, VendorVersion: "1.0.0"}, nil
}

func (p *fakePlugin) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["NodeGetInfo"]++
	if p.infoErr != nil {
		return nil, p.infoErr
	}
	resp := &csipb.NodeGetInfoResponse{NodeId: p.nodeID, MaxVolumesPerNode: p.maxVols}
	if p.topology != nil {
		resp.AccessibleTopology = &csipb.Topology{Segments: p.topology}
	}
	return resp, nil
}

func (p *fakePlugin) NodeGetCapabilities(_ context.Context, req *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	if err := p.record("NodeGetCapabilities", req); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &csipb.NodeGetCapabilitiesResponse{}
	for _, c := range p.caps {
		resp.Capabilities = append(resp.Capabilities, &csipb.NodeServiceCapability{
			Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: c}}})
	}
	return resp, nil
}

func (p *fakePlugin) NodeStageVolume(_ context.Context, req *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	return &csipb.NodeStageVolumeResponse{}, p.record("NodeStageVolume", req)
}

func (p *fakePlugin) NodeUnstageVolume(_ context.Context, req *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	return &csipb.NodeUnstageVolumeResponse{}, p.record("NodeUnstageVolume", req)
}

func (p *fakePlugin) NodePublishVolume(_ context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	return &csipb.NodePublishVolumeResponse{}, p.record("NodePublishVolume", req)
}

func (p *fakePlugin) NodeUnpublishVolume(_ context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	return &csipb.NodeUnpublishVolumeResponse{}, p.record("NodeUnpublishVolume", req)
}

func (p *fakePlugin) NodeExpandVolume(_ context.Context, req *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	if err := p.record("NodeExpandVolume", req); err != nil {
		return nil, err
	}
	return &csipb.NodeExpandVolumeResponse{CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}, nil
}

func (p *fakePlugin) NodeGetVolumeStats(_ context.Context, req *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	if err := p.record("NodeGetVolumeStats", req); err != nil {
		return nil, err
	}
	if req.VolumeId == "no-usage" {
		return &csipb.NodeGetVolumeStatsResponse{}, nil
	}
	return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{{Unit: csipb.VolumeUsage_BYTES, Total: 100, Used: 40, Available: 60}}}, nil
}
