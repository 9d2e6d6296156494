package podconfig

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func TestImageUser(t *testing.T) {
	tests := []struct {
		name     string
		img      *runtimeapi.Image
		wantUID  *int64
		wantName string
	}{
		{name: "numeric user", img: &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 1234}}, wantUID: ptr.To[int64](1234)},
		{name: "root by number", img: &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 0}}, wantUID: ptr.To[int64](0)},
		{name: "uid wins over a name", img: &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 7}, Username: "app"}, wantUID: ptr.To[int64](7)},
		{name: "user name", img: &runtimeapi.Image{Username: "app"}, wantName: "app"},
		{name: "no user is root", img: &runtimeapi.Image{Id: "sha256:x"}, wantUID: ptr.To[int64](0)},
		{name: "no image is root", img: nil, wantUID: ptr.To[int64](0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			uid, name := ImageUser(tt.img)
			if !equalInt64Ptr(uid, tt.wantUID) || name != tt.wantName {
				t.Errorf("ImageUser = %v, %q; want %v, %q", ptr.Deref(uid, -1), name, ptr.Deref(tt.wantUID, -1), tt.wantName)
			}
		})
	}
}

type imageStatusFunc func(context.Context, *runtimeapi.ImageSpec) (*runtimeapi.Image, error)

func (f imageStatusFunc) ImageStatus(ctx context.Context, s *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	return f(ctx, s)
}

func TestLookupImageUser(t *testing.T) {
	errDown := errors.New("runtime down")
	images := imageStatusFunc(func(_ context.Context, s *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
		switch s.GetImage() {
		case "down":
			return nil, errDown
		case "nonroot":
			return &runtimeapi.Image{Id: "sha256:n", Uid: &runtimeapi.Int64Value{Value: 1234}}, nil
		}
		return &runtimeapi.Image{Id: "sha256:b"}, nil
	})
	uid, _, err := LookupImageUser(context.Background(), images, &runtimeapi.ImageSpec{Image: "nonroot"})
	if err != nil || ptr.Deref(uid, -1) != 1234 {
		t.Errorf("nonroot: uid %v, err %v", ptr.Deref(uid, -1), err)
	}
	uid, _, err = LookupImageUser(context.Background(), images, &runtimeapi.ImageSpec{Image: "busybox"})
	if err != nil || ptr.Deref(uid, -1) != 0 {
		t.Errorf("busybox: uid %v, err %v; want root", ptr.Deref(uid, -1), err)
	}
	if _, _, err = LookupImageUser(context.Background(), images, &runtimeapi.ImageSpec{Image: "down"}); !errors.Is(err, errDown) {
		t.Errorf("down: err %v, want %v", err, errDown)
	}
}

func TestVerifyRunAsNonRoot(t *testing.T) {
	const pod = `(pod: "web_default(1234-abcd)", container: app)`
	tests := []struct {
		name     string
		podSC    *corev1.PodSecurityContext
		ctrSC    *corev1.SecurityContext
		uid      *int64
		username string
		want     string // "" means allowed
	}{
		{name: "runAsNonRoot unset, root image", uid: ptr.To[int64](0)},
		{name: "runAsNonRoot false, root image", ctrSC: &corev1.SecurityContext{RunAsNonRoot: ptr.To(false)}, uid: ptr.To[int64](0)},
		{name: "root image", ctrSC: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, uid: ptr.To[int64](0),
			want: "container has runAsNonRoot and image will run as root " + pod},
		{name: "pod-level runAsNonRoot, root image", podSC: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, uid: ptr.To[int64](0),
			want: "container has runAsNonRoot and image will run as root " + pod},
		{name: "container false overrides pod true", podSC: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			ctrSC: &corev1.SecurityContext{RunAsNonRoot: ptr.To(false)}, uid: ptr.To[int64](0)},
		{name: "non-root image", ctrSC: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, uid: ptr.To[int64](1234)},
		{name: "named image user", ctrSC: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, username: "app",
			want: "container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root " + pod},
		{name: "invalid image uid", ctrSC: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, uid: ptr.To[int64](1 << 32),
			want: "container has runAsNonRoot and image has an invalid user id (4294967296). (Must be 1-(2147483647)): " +
				"must be between 0 and 2147483647, inclusive " + pod},
		{name: "explicit runAsUser 0", ctrSC: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)},
			uid: ptr.To[int64](1234), want: "container's runAsUser breaks non-root policy " + pod},
		{name: "pod runAsUser 0", podSC: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)},
			ctrSC: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, uid: ptr.To[int64](1234),
			want: "container's runAsUser breaks non-root policy " + pod},
		{name: "explicit non-root runAsUser, root image", ctrSC: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000)},
			uid: ptr.To[int64](0)},
		{name: "container runAsUser overrides pod 0", podSC: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)},
			ctrSC: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}, uid: ptr.To[int64](0)},
		{name: "unknown image user is not checked", ctrSC: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod()
			p.Spec.SecurityContext = tt.podSC
			p.Spec.Containers[0].SecurityContext = tt.ctrSC
			err := verifyRunAsNonRoot(p, &p.Spec.Containers[0], tt.uid, tt.username)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("verifyRunAsNonRoot = %q\nwant %q", got, tt.want)
			}
		})
	}
}

func equalInt64Ptr(a, b *int64) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
