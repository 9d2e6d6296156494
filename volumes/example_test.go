package volumes_test

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/volumes"
)

// Example shows how the Pod reconciler drives a pod's volumes: SetUp on every sync (each error is a
// FailedMount event), containers created only once Ready, Mounts per container, TearDown once the
// pod's containers are stopped and before its directory is removed.
func Example() {
	var mgr ctrl.Manager // the agent's manager
	m := &volumes.Manager{
		RootDir:  "/var/lib/kubelet",
		NodeName: "node-1",
		Clock:    clock.RealClock{},
		Objects: &volumes.CachedObjects{
			Reader: mgr.GetAPIReader(), Tokens: mgr.GetClient(), Clock: clock.RealClock{}, TTL: 10 * time.Second,
		},
	}
	ctx := context.Background()
	var pod *corev1.Pod // the pod being synced

	for _, err := range m.SetUp(ctx, pod) {
		_ = err // recorder.Event(pod, corev1.EventTypeWarning, "FailedMount", err.Error())
	}
	if !m.Ready(pod.UID) {
		return // stay in ContainerCreating; the next sync tries again
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		mounts, err := m.Mounts(pod, c, map[string]string{ /* the container's env */ })
		_, _ = mounts, err // into runtimeapi.ContainerConfig.Mounts
	}

	// Once the pod's containers are stopped:
	_ = m.TearDown(ctx, pod.UID)
}
