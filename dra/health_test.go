package dra

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// healthPlugin is a fakePlugin that also streams health reports: each one sent on reports.
type healthPlugin struct {
	drahealthv1.UnimplementedDRAResourceHealthServer
	*fakePlugin
	reports chan *drahealthv1.NodeWatchResourcesResponse
}

func (h *healthPlugin) NodeWatchResources(_ *drahealthv1.NodeWatchResourcesRequest, s drahealthv1.DRAResourceHealth_NodeWatchResourcesServer) error {
	for {
		select {
		case r := <-h.reports:
			if err := s.Send(r); err != nil {
				return err
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func TestDeviceHealthInThePodStatus(t *testing.T) {
	a := claimPod("a", "c1")
	c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(allocatedClaim("c1", "gpu.example.com", a)).Build()
	changed := make(chan []types.UID, 10)
	root := t.TempDir()
	m, err := NewManager(Options{RootDir: root, NodeName: "node-1", Reader: c,
		OnHealthChange: func(uids []types.UID) { changed <- uids }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	h := &healthPlugin{fakePlugin: &fakePlugin{driver: "gpu.example.com"}, reports: make(chan *drahealthv1.NodeWatchResourcesResponse, 1)}
	dir := socketDir(t)
	endpoint := filepath.Join(dir, "plugin.sock")
	srv := grpc.NewServer()
	drapbv1.RegisterDRAPluginServer(srv, h.fakePlugin)
	drahealthv1.RegisterDRAResourceHealthServer(srv, h)
	l, err := net.Listen("unix", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	if err := m.Plugins().RegisterPlugin(ctx, h.driver, endpoint, []string{"v1.DRAPlugin", "v1.DRAResourceHealth"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Plugins().stop)
	if err := m.PrepareResources(ctx, a); err != nil {
		t.Fatal(err)
	}

	// No report yet: the device's health is Unknown, under the claim's name and request.
	st := m.AllocatedResourcesStatus(a, "app")
	if len(st) != 1 || st[0].Name != "claim:dev/gpu" || len(st[0].Resources) != 1 ||
		st[0].Resources[0].Health != corev1.ResourceHealthStatusUnknown || st[0].Resources[0].ResourceID != "gpu.example.com/dev=c1" {
		t.Fatalf("status before a report: %+v", st)
	}
	if st := m.AllocatedResourcesStatus(a, "sidecar"); st != nil {
		t.Fatalf("a container without claims: %+v", st)
	}

	h.reports <- &drahealthv1.NodeWatchResourcesResponse{Devices: []*drahealthv1.DeviceHealth{{
		Device: &drahealthv1.DeviceIdentifier{PoolName: "node-1", DeviceName: "dev-0"},
		Health: drahealthv1.HealthStatus_UNHEALTHY, Message: "ECC errors", LastUpdatedTime: time.Now().Unix()}}}
	select {
	case uids := <-changed:
		if len(uids) != 1 || uids[0] != a.UID {
			t.Fatalf("health change for %v, want pod a", uids)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no health change reported")
	}
	st = m.AllocatedResourcesStatus(a, "app")
	if st[0].Resources[0].Health != corev1.ResourceHealthStatusUnhealthy || st[0].Resources[0].Message == nil ||
		*st[0].Resources[0].Message != "ECC errors" {
		t.Fatalf("status after the report: %+v", st)
	}
	b, err := os.ReadFile(filepath.Join(root, HealthStateFile))
	if err != nil || !strings.Contains(string(b), `"Health":"Unhealthy"`) {
		t.Fatalf("health file: %s, %v", b, err)
	}
}
