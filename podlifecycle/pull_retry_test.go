package podlifecycle

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A failed pull is tried again once its back-off has passed since the failure (the kubelet's
// IsInBackOffSinceUpdate): an image that became pullable meanwhile runs after the first 10 s back-off, not
// after the back-off entry expires (10 min).
func TestPullIsRetriedWhenItsBackOffHasPassed(t *testing.T) {
	b := newLifecycleBed(t)
	const image = "registry.example/app:1"
	b.create(bedPod("web", func(p *corev1.Pod) { p.Spec.Containers[0].Image = image }))
	pulls := func() int { return len(b.calls("PullImage")) }
	reason := func() string {
		cs := b.pod("web").Status.ContainerStatuses
		if len(cs) == 0 || cs[0].State.Waiting == nil {
			return ""
		}
		return cs[0].State.Waiting.Reason
	}
	b.sync("web")
	b.waitFor("the first pull to fail", func() bool {
		b.sync("web")
		return reason() == "ErrImagePull"
	})
	if pulls() != 1 {
		t.Fatalf("%d pulls, want 1", pulls())
	}
	b.rt.SetPullable(image, 1<<20)
	b.step(5 * time.Second)
	b.sync("web")
	if pulls() != 1 || reason() != "ImagePullBackOff" {
		t.Fatalf("within the back-off: %d pulls, reason %q; want no new pull and ImagePullBackOff", pulls(), reason())
	}
	b.step(6 * time.Second)
	b.sync("web") // starts the second pull in the background
	b.waitFor("a second pull 11 s after the failed one (back-off 10 s)", func() bool { return pulls() == 2 })
	b.waitFor("the container to run after the second pull", func() bool {
		b.sync("web")
		return slices.ContainsFunc(b.containers("web"), func(c *runtimeapi.Container) bool { return c.Metadata.Name == "app" })
	})
}
