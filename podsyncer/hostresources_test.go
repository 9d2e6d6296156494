package podsyncer

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// TestContainerConfigCarriesTheHostResources: the node's huge page sizes, cgroup v2 group OOM kill and swap
// settings reach the CRI container config the pod worker builds.
func TestContainerConfigCarriesTheHostResources(t *testing.T) {
	host := podconfig.HostResources{HugePageSizes: []int64{2 << 20, 1 << 30}, CgroupV2: true, SwapController: true}
	r := newTestSyncer(t, Deps{Runtime: imageUserRuntime{}}, Options{RootDir: t.TempDir(), HostResources: host})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "1234-abcd"},
		Spec: corev1.PodSpec{EnableServiceLinks: ptr.To(false), Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	c := &pod.Spec.Containers[0]
	cfg, err := r.config.containerConfig(context.Background(), pod, c, startAction{container: c}, &runtime.PodStatus{}, "sha256:x")
	if err != nil {
		t.Fatal(err)
	}
	res := cfg.GetLinux().GetResources()
	var sizes []string
	for _, l := range res.GetHugepageLimits() {
		if l.Limit != 0 {
			t.Errorf("hugetlb %s limited to %d, want 0", l.PageSize, l.Limit)
		}
		sizes = append(sizes, l.PageSize)
	}
	if len(sizes) != 2 || sizes[0] != "2MB" || sizes[1] != "1GB" {
		t.Errorf("hugetlb limits for %v, want 2MB and 1GB", sizes)
	}
	if u := res.GetUnified(); u["memory.oom.group"] != "1" || u["memory.swap.max"] != "0" {
		t.Errorf("unified %v, want memory.oom.group 1 and memory.swap.max 0", u)
	}
}
