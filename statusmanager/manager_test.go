package statusmanager

import (
	"context"
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/nodelet/nodelet/podrules"
)

// countingClient is a fake API server with pods whose status is a subresource, counting status patches.
func countingClient(t *testing.T, patches *int, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&corev1.Pod{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			*patches++
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		}}).Build()
}

func apiPod(name string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}}
}

func get(t *testing.T, c client.Client, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func running(ready corev1.ConditionStatus) func(*corev1.PodStatus) corev1.PodStatus {
	return func(*corev1.PodStatus) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}
	}
}

// A status is written when the API does not hold it, once; the status last set is the one kept; a user's
// readiness gate in the API survives the agent's writes.
func TestSetPodStatusWritesOnlyChanges(t *testing.T) {
	ctx := context.Background()
	gate := corev1.PodCondition{Type: "example.com/gate", Status: corev1.ConditionTrue}
	pod := apiPod("web", "u1")
	pod.Status.Conditions = []corev1.PodCondition{gate}
	var patches int
	c := countingClient(t, &patches, pod)
	m := New(c)

	for i, want := range []struct {
		ready   corev1.ConditionStatus
		written bool
	}{{corev1.ConditionFalse, true}, {corev1.ConditionFalse, false}, {corev1.ConditionTrue, true}} {
		res, err := m.SetPodStatus(ctx, get(t, c, "web"), running(want.ready))
		if err != nil {
			t.Fatal(err)
		}
		if res.Written != want.written {
			t.Errorf("set %d (Ready=%s): written %v, want %v", i, want.ready, res.Written, want.written)
		}
		if got := m.Status("u1"); got == nil || got.Conditions[0].Status != want.ready {
			t.Errorf("set %d: kept status %v, want Ready=%s", i, got, want.ready)
		}
	}
	if patches != 2 {
		t.Errorf("%d status patches, want 2", patches)
	}
	got := get(t, c, "web").Status
	if got.Phase != corev1.PodRunning || len(got.Conditions) != 2 {
		t.Fatalf("API status %+v, want Running with Ready and the user's gate", got)
	}
	for _, cd := range got.Conditions {
		if cd.Type == gate.Type && cd.Status != corev1.ConditionTrue {
			t.Errorf("the user's gate became %s", cd.Status)
		}
	}
}

// A static pod's status goes to its mirror pod; with no mirror pod (or no API server) it is kept, not
// written.
func TestStaticPodStatusGoesToItsMirror(t *testing.T) {
	ctx := context.Background()
	static := apiPod("etcd-node", "static-uid")
	static.Annotations = map[string]string{podrules.ConfigSourceAnnotation: "file", podrules.ConfigHashAnnotation: "h1"}
	var patches int
	c := countingClient(t, &patches)
	for _, m := range []*Manager{New(c), New(nil)} {
		res, err := m.SetPodStatus(ctx, static, running(corev1.ConditionTrue))
		if err != nil || res.Written {
			t.Fatalf("without a mirror pod: written %v, err %v; want kept only", res.Written, err)
		}
		if m.Status("static-uid") == nil {
			t.Error("the status set was not kept")
		}
	}
	mirror := apiPod("etcd-node", "mirror-uid")
	mirror.Annotations = map[string]string{podrules.ConfigMirrorAnnotation: "h1"}
	if err := c.Create(ctx, mirror); err != nil {
		t.Fatal(err)
	}
	m := New(c)
	if res, err := m.SetPodStatus(ctx, static, running(corev1.ConditionTrue)); err != nil || !res.Written {
		t.Fatalf("with a mirror pod: written %v, err %v", res.Written, err)
	}
	if got := get(t, c, "etcd-node").Status.Phase; got != corev1.PodRunning {
		t.Errorf("mirror pod phase %q, want Running", got)
	}
}

// A status someone else wrote after the agent's is reported overwritten, until the agent writes its own
// back; a pod the agent never wrote is not. A pod gone from the API is no error.
func TestOverwrittenStatusIsReportedUntilWrittenBack(t *testing.T) {
	ctx := context.Background()
	var patches int
	c := countingClient(t, &patches, apiPod("a", "ua"), apiPod("b", "ub"))
	m := New(c)
	if _, err := m.SetPodStatus(ctx, get(t, c, "a"), running(corev1.ConditionTrue)); err != nil {
		t.Fatal(err)
	}
	list := func() []corev1.Pod {
		var l corev1.PodList
		if err := c.List(ctx, &l); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	if got := m.Overwritten(list()); len(got) != 0 {
		t.Fatalf("overwritten right after the agent's write: %v", got)
	}
	forged := get(t, c, "a")
	forged.Status.Phase = corev1.PodFailed
	if err := c.Status().Update(ctx, forged); err != nil {
		t.Fatal(err)
	}
	got := m.Overwritten(list())
	if len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("overwritten = %v, want pod a only", got)
	}
	if res, err := m.SetPodStatus(ctx, get(t, c, "a"), running(corev1.ConditionTrue)); err != nil || !res.Written {
		t.Fatalf("writing back: written %v, err %v", res.Written, err)
	}
	if got := m.Overwritten(list()); len(got) != 0 {
		t.Errorf("overwritten after the write back: %v", got)
	}
	m.Forget("ua")
	if m.Status("ua") != nil {
		t.Error("status kept after Forget")
	}

	gone := apiPod("gone", "ug")
	if res, err := m.SetPodStatus(ctx, gone, running(corev1.ConditionTrue)); err != nil || res.Written {
		t.Errorf("pod gone from the API: written %v, err %v; want neither", res.Written, err)
	}
}

// kubelet_terminated_containers_total counts a container's termination once, when a status first shows it
// terminated, by container type, exit code and reason; a restart that runs it again and ends it again counts
// again.
func TestTerminationsAreCountedOnce(t *testing.T) {
	m := New(nil)
	reg := prometheus.NewRegistry()
	if err := m.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	crashed := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 139, Reason: "Error"}}
	status := func(init, main corev1.ContainerState) corev1.PodStatus {
		return corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", State: init}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "app", State: main}},
		}
	}
	done := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	m.Keep("u1", status(running, corev1.ContainerState{}))
	m.Keep("u1", status(done, corev1.ContainerState{}))
	m.Keep("u1", status(done, running))
	m.Keep("u1", status(done, crashed))
	m.Keep("u1", status(done, crashed)) // the same status again: no new termination
	m.Keep("u1", status(done, running))
	m.Keep("u1", status(done, crashed))
	want := map[string]float64{"init_container/0/Completed": 1, "container/139/Error": 2}
	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kubelet_terminated_containers_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			got[l["container_type"]+"/"+l["exit_code"]+"/"+l["reason"]] = s.GetCounter().GetValue()
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("terminations counted %v, want %v", got, want)
	}
}
