package volumes

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A pod whose attachable volume waited the kubelet's 2m3s while its VolumeAttachment failed with
// ResourceExhausted, for a driver that refreshes its allocatable count, is rejected with the kubelet's
// VolumeAttachmentLimitExceeded, and the driver is asked its node information again; another attach error,
// or a driver without the refresh period, only keeps the pod waiting.
func TestAttachLimitExceededRejectsThePodAfterTheAttachTimeout(t *testing.T) {
	for _, tc := range []struct {
		name   string
		period *int64
		code   codes.Code
		reject bool
	}{
		{"at the attachment limit", ptr.To[int64](10), codes.ResourceExhausted, true},
		{"another attach error", ptr.To[int64](10), codes.Internal, false},
		{"a driver without a refresh period", nil, codes.ResourceExhausted, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newCSIEnv(t, storagev1.CSIDriverSpec{NodeAllocatableUpdatePeriodSeconds: tc.period})
			var refreshed []string
			env.m.RefreshCSIDriver = func(_ context.Context, driver string) { refreshed = append(refreshed, driver) }
			env.bindCSIClaim("vol-1")
			pod := csiPod("uid-1")
			ctx := context.Background()
			env.m.MarkVolumesReportedInUse([]corev1.UniqueVolumeName{UniqueCSIVolumeName(testDriver, "vol-1")})
			env.m.AttachedVolumes = func(context.Context) ([]corev1.AttachedVolume, error) { return nil, nil }
			name := attachmentName("vol-1", testDriver, "node-1")
			env.objs.attachments[name] = &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
				Status: storagev1.VolumeAttachmentStatus{AttachError: &storagev1.VolumeError{
					Message: "rpc error: attachment limit exceeded", ErrorCode: ptr.To(int32(tc.code))}}}

			limit := func() *AttachLimitExceededError {
				var out *AttachLimitExceededError
				for _, err := range env.m.SetUp(ctx, pod) {
					if errors.As(err, &out) {
						return out
					}
				}
				return nil
			}
			if got := limit(); got != nil {
				t.Fatalf("rejected at once: %v", got)
			}
			env.clock.Step(2 * time.Minute)
			if got := limit(); got != nil {
				t.Fatalf("rejected after 2m, before the kubelet's 2m3s: %v", got)
			}
			env.clock.Step(3 * time.Second)
			got := limit()
			if !tc.reject {
				if got != nil || len(refreshed) != 0 {
					t.Fatalf("rejected %v, drivers refreshed %v; want the pod to keep waiting", got, refreshed)
				}
				return
			}
			want := "Node has reached its volume attachment limit, rejecting pod. unmounted volumes=[data], unattached volumes=[data], " +
				"failed to process volumes=[]: timed out waiting for the condition"
			if got == nil || got.Error() != want || got.RejectReason() != "VolumeAttachmentLimitExceeded" {
				t.Fatalf("rejection %v, want %q", got, want)
			}
			if !slices.Equal(refreshed, []string{testDriver}) {
				t.Errorf("drivers refreshed %v, want [%s]", refreshed, testDriver)
			}
		})
	}
}
