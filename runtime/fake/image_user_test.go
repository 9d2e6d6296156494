package fake_test

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func TestImageUser(t *testing.T) {
	e := start(t)
	tests := []struct {
		name, user string
		wantUID    *int64
		wantName   string
	}{
		{name: "no user", user: ""},
		{name: "numeric", user: "1234", wantUID: ptr.To[int64](1234)},
		{name: "root", user: "0", wantUID: ptr.To[int64](0)},
		{name: "uid and gid", user: "1234:5678", wantUID: ptr.To[int64](1234)},
		{name: "name", user: "app", wantName: "app"},
		{name: "name and group", user: "app:staff", wantName: "app"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.rt.SetImageUser(testImage, tt.user) // the image is present already
			st, err := e.ic.ImageStatus(e.ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: testImage}})
			if err != nil {
				t.Fatalf("ImageStatus: %v", err)
			}
			img := st.GetImage()
			if gotUID := img.GetUid(); (gotUID == nil) != (tt.wantUID == nil) || (gotUID != nil && gotUID.GetValue() != *tt.wantUID) {
				t.Errorf("Uid = %v, want %v", gotUID, tt.wantUID)
			}
			if img.GetUsername() != tt.wantName {
				t.Errorf("Username = %q, want %q", img.GetUsername(), tt.wantName)
			}
		})
	}
}

func TestImageUserAppliesToLaterPulls(t *testing.T) {
	e := start(t)
	e.rt.SetImageUser("nonroot:1.4", "1234")
	e.rt.SetPullable("docker.io/library/nonroot:1.4", 100)
	resp, err := e.ic.PullImage(e.ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nonroot:1.4"}})
	if err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	st, err := e.ic.ImageStatus(e.ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: resp.GetImageRef()}})
	if err != nil || st.GetImage().GetUid().GetValue() != 1234 {
		t.Fatalf("ImageStatus = %v, %v; want Uid 1234", st, err)
	}
}

func TestContainerConfig(t *testing.T) {
	e := start(t)
	if e.rt.ContainerConfig("missing") != nil {
		t.Fatal("ContainerConfig of an unknown container is not nil")
	}
	sb := e.runSandbox(t, "web", nil)
	cfg := containerConfig("app", nil)
	cfg.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		RunAsUser: &runtimeapi.Int64Value{Value: 1234}}}
	resp, err := e.rc.CreateContainer(e.ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	got := e.rt.ContainerConfig(resp.GetContainerId())
	if got.GetLinux().GetSecurityContext().GetRunAsUser().GetValue() != 1234 || got.GetMetadata().GetName() != "app" {
		t.Fatalf("ContainerConfig = %v", got)
	}
}
