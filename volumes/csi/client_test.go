package csi_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodelet/nodelet/volumes/csi"
)

// driverClient serves a fake driver and returns it with a client of its node service.
func driverClient(t *testing.T) (*fakePlugin, *csi.Client) {
	t.Helper()
	dir := tempDir(t)
	p := newFakePlugin(t, dir, driverName)
	p.start(t, filepath.Join(dir, "reg.sock"))
	return p, csi.NewClient(driverName, p.info.Endpoint)
}

var (
	stageReq   = &csipb.NodeStageVolumeRequest{VolumeId: "vol", StagingTargetPath: "/staging"}
	publishReq = &csipb.NodePublishVolumeRequest{VolumeId: "vol", TargetPath: "/target"}
	expandReq  = &csipb.NodeExpandVolumeRequest{VolumeId: "vol", VolumePath: "/target", CapacityRange: &csipb.CapacityRange{RequiredBytes: 1 << 30}}
)

// mutating are the calls whose non-final errors leave the volume's state uncertain.
var mutating = map[string]func(context.Context, *csi.Client) error{
	"NodeStageVolume":   func(ctx context.Context, c *csi.Client) error { return c.NodeStageVolume(ctx, stageReq) },
	"NodePublishVolume": func(ctx context.Context, c *csi.Client) error { return c.NodePublishVolume(ctx, publishReq) },
	"NodeExpandVolume":  func(ctx context.Context, c *csi.Client) error { return c.NodeExpandVolume(ctx, expandReq) },
}

func TestNonFinalErrorsOfStagePublishAndExpandAreUncertain(t *testing.T) {
	p, c := driverClient(t)
	for method, call := range mutating {
		for code, uncertain := range map[codes.Code]bool{
			codes.DeadlineExceeded: true, codes.Canceled: true, codes.Unavailable: true, codes.ResourceExhausted: true,
			codes.Aborted: true, codes.Internal: false, codes.InvalidArgument: false, codes.NotFound: false,
		} {
			p.setErr(method, status.Error(code, "driver says no"))
			err := call(context.Background(), c)
			if csi.IsUncertain(err) != uncertain {
				t.Errorf("%s answering %s: uncertain %v, want %v (%v)", method, code, csi.IsUncertain(err), uncertain, err)
			}
			if status.Code(err) != code || err.Error() != "rpc error: code = "+code.String()+" desc = driver says no" {
				t.Errorf("%s answering %s: error %q does not keep the driver's status", method, code, err)
			}
		}
		p.setErr(method, nil)
		if err := call(context.Background(), c); err != nil {
			t.Errorf("%s: %v", method, err)
		}
	}
}

func TestUnreachableDriverIsUncertain(t *testing.T) {
	c := csi.NewClient(driverName, filepath.Join(tempDir(t), "none.sock"))
	for method, call := range mutating {
		if err := call(context.Background(), c); !csi.IsUncertain(err) || status.Code(err) != codes.Unavailable {
			t.Errorf("%s to a driver that is not there: %v, want an uncertain Unavailable", method, err)
		}
	}
	if err := c.NodeUnpublishVolume(context.Background(), "vol", "/target"); err == nil || csi.IsUncertain(err) {
		t.Errorf("NodeUnpublishVolume to a driver that is not there: %v, want a plain error", err)
	}
}

func TestUnstageAndUnpublishErrorsAreTheDriversAsTheyAre(t *testing.T) {
	p, c := driverClient(t)
	p.setErr("NodeUnstageVolume", status.Error(codes.DeadlineExceeded, "slow"))
	p.setErr("NodeUnpublishVolume", status.Error(codes.Internal, "busy"))
	if err := c.NodeUnstageVolume(context.Background(), "vol", "/staging"); status.Code(err) != codes.DeadlineExceeded || csi.IsUncertain(err) {
		t.Errorf("NodeUnstageVolume: %v", err)
	}
	if err := c.NodeUnpublishVolume(context.Background(), "vol", "/target"); status.Code(err) != codes.Internal {
		t.Errorf("NodeUnpublishVolume: %v", err)
	}
}

func TestNodeCapabilitiesAreAskedOnce(t *testing.T) {
	p, c := driverClient(t)
	p.caps = []csipb.NodeServiceCapability_RPC_Type{csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME, csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS}
	for range 3 {
		caps, err := c.NodeCapabilities(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] || !caps[csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS] ||
			caps[csipb.NodeServiceCapability_RPC_EXPAND_VOLUME] {
			t.Errorf("capabilities %v", caps)
		}
	}
	if n := p.callCount("NodeGetCapabilities"); n != 1 {
		t.Errorf("NodeGetCapabilities called %d times, want once", n)
	}
}

func TestNodeCapabilitiesFailureIsNotKept(t *testing.T) {
	p, c := driverClient(t)
	p.setErr("NodeGetCapabilities", status.Error(codes.Unavailable, "starting"))
	if _, err := c.NodeCapabilities(context.Background()); status.Code(err) != codes.Unavailable {
		t.Fatalf("NodeCapabilities: %v", err)
	}
	p.setErr("NodeGetCapabilities", nil)
	if _, err := c.NodeCapabilities(context.Background()); err != nil || p.callCount("NodeGetCapabilities") != 2 {
		t.Errorf("NodeCapabilities after a failure: %v, %d calls", err, p.callCount("NodeGetCapabilities"))
	}
}

func TestNodeGetVolumeStats(t *testing.T) {
	_, c := driverClient(t)
	resp, err := c.NodeGetVolumeStats(context.Background(), "vol", "/target")
	if err != nil || len(resp.Usage) != 1 || resp.Usage[0].Used != 40 {
		t.Errorf("NodeGetVolumeStats: %v %v", resp, err)
	}
	if _, err := c.NodeGetVolumeStats(context.Background(), "no-usage", "/target"); err == nil ||
		err.Error() != "failed to get usage from response. usage is nil" {
		t.Errorf("NodeGetVolumeStats without usage: %v", err)
	}
}

func TestMissingArgumentsAreRefusedBeforeTheCall(t *testing.T) {
	p, c := driverClient(t)
	ctx := context.Background()
	for want, err := range map[string]error{
		"missing volume id":           c.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{StagingTargetPath: "/s"}),
		"missing staging target path": c.NodeUnstageVolume(ctx, "vol", ""),
		"missing target path":         c.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: "vol"}),
		"missing volume path":         c.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{VolumeId: "vol"}),
		"size can not be less than 0": c.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{VolumeId: "vol", VolumePath: "/t", CapacityRange: &csipb.CapacityRange{RequiredBytes: -1}}),
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	if _, err := c.NodeGetVolumeStats(ctx, "", "/t"); err == nil || err.Error() != "missing volume id" {
		t.Errorf("NodeGetVolumeStats without volume: %v", err)
	}
	for _, m := range []string{"NodeStageVolume", "NodeUnstageVolume", "NodePublishVolume", "NodeExpandVolume", "NodeGetVolumeStats"} {
		if p.callCount(m) != 0 {
			t.Errorf("%s reached the driver with a missing argument", m)
		}
	}
}

func TestUncertainErrorUnwraps(t *testing.T) {
	cause := status.Error(codes.Aborted, "pending")
	err := error(&csi.UncertainError{Err: cause})
	if !errors.Is(err, cause) || err.Error() != cause.Error() || csi.IsFinal(cause) || !csi.IsFinal(status.Error(codes.Internal, "x")) ||
		csi.IsFinal(errors.New("not a status")) {
		t.Error("UncertainError / IsFinal")
	}
}
