package podlifecycle

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// waitingVolumes is a volume manager whose volumes wait (for an attach, say) without failing: SetUp reports no
// error and the pod's volumes are not ready until attached is set.
type waitingVolumes struct {
	noVolumes
	attached bool
}

func (v *waitingVolumes) SetUp(context.Context, *corev1.Pod) []error { return nil }
func (v *waitingVolumes) Ready(types.UID) bool                       { return v.attached }
func (v *waitingVolumes) Mounts(*corev1.Pod, *corev1.Container, map[string]string) ([]*runtimeapi.Mount, error) {
	return nil, nil
}

// A pod whose volume waits without an error starts no container and is looked at again within the
// volume-wait period (the kubelet polls every 300 ms), not at the next resync.
func TestWaitingVolumeHoldsContainersAndRequeuesSoon(t *testing.T) {
	b := newLifecycleBed(t)
	vols := &waitingVolumes{}
	b.r.volumes = vols
	b.create(bedPod("web"))
	res := b.sync("web")
	if n := len(b.containers("web")); n != 0 {
		t.Fatalf("%d containers created while the pod's volume waits, want 0", n)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 500*time.Millisecond {
		t.Fatalf("requeued after %v while a volume waits, want within 500ms", res.RequeueAfter)
	}
	vols.attached = true
	b.sync("web")
	if n := len(b.containers("web")); n != 1 {
		t.Fatalf("%d containers once the volume is ready, want 1", n)
	}
}
