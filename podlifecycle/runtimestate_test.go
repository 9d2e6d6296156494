package podlifecycle

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

// reads are the runtime reads of a pod's state among calls: full reads (ListPodSandbox and ListContainers
// filtered by the pod's UID, each followed by the statuses of what they list) and single reads.
func reads(calls []string) map[string]int {
	out := map[string]int{}
	for _, c := range calls {
		if slices.Contains([]string{"ListPodSandbox", "ListContainers", "PodSandboxStatus", "ContainerStatus"}, c) {
			out[c]++
		}
	}
	return out
}

// syncCalls runs one Reconcile (no relist) and returns the CRI calls it made.
func (b *lifecycleBed) syncCalls(name string) []string {
	b.t.Helper()
	before := len(b.rt.Calls())
	if _, err := b.r.Reconcile(b.ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}); err != nil {
		b.t.Fatalf("reconcile %s: %v", name, err)
	}
	return b.rt.Calls()[before:]
}

func (b *lifecycleBed) relist() {
	b.t.Helper()
	if err := b.pleg.Relist(b.ctx); err != nil {
		b.t.Fatal(err)
	}
}

// A sync reads the pod's runtime state at most once, and not at all while the PLEG's cache is current: the
// start of a pod reads the (empty) state once, then only what its own actions created (the sandbox's
// status for its IP, each started container's status); a sync after a relist that saw nothing new reads
// nothing; a container's exit seen by a relist makes the next sync read the state again, once.
func TestOneRuntimeReadPerSync(t *testing.T) {
	b := newLifecycleBed(t)
	b.create(bedPod("web", func(p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, bedContainer("sidecar"))
	}))
	b.relist()

	got := reads(b.syncCalls("web"))
	want := map[string]int{"ListPodSandbox": 1, "ListContainers": 1, "PodSandboxStatus": 1, "ContainerStatus": 2}
	if !maps.Equal(got, want) {
		t.Errorf("first sync read %v, want %v", got, want)
	}
	if p := b.pod("web"); p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		t.Errorf("after the first sync: phase %s, pod IP %q; want Running with an IP", p.Status.Phase, p.Status.PodIP)
	}

	// The relist sees what the sync did: the cache stays current and the resyncs read nothing.
	b.relist()
	for i := range 3 {
		if got := reads(b.syncCalls("web")); len(got) != 0 {
			t.Errorf("resync %d read %v, want nothing", i, got)
		}
	}

	// The runtime changes behind the agent's back: the relist invalidates, the next sync reads once, and
	// restarts the container (reading back only the new one).
	b.exit("web", "app", 1)
	b.relist()
	got = reads(b.syncCalls("web"))
	want = map[string]int{"ListPodSandbox": 1, "ListContainers": 1, "PodSandboxStatus": 1, "ContainerStatus": 2 + 1}
	if !maps.Equal(got, want) {
		t.Errorf("sync after an exit read %v, want %v", got, want)
	}
	if cs := b.pod("web").Status.ContainerStatuses; len(cs) != 2 || cs[0].RestartCount != 1 || cs[0].State.Running == nil {
		t.Errorf("container statuses after the restart: %+v", cs)
	}
	b.relist()
	if got := reads(b.syncCalls("web")); len(got) != 0 {
		t.Errorf("resync after the restart read %v, want nothing", got)
	}
}
