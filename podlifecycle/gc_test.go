package podlifecycle

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/containergc"
)

// PodsForGC names the desired and tracked pods, busy while a worker terminates or removes them.
func TestPodsForGC(t *testing.T) {
	b := newLifecycleBed(t)
	never := func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }
	for _, name := range []string{"run", "done", "del", "forced"} {
		b.create(bedPod(name, never))
		b.sync(name)
	}
	b.create(bedPod("waiting")) // desired, not synced yet
	b.exit("done", "app", 0)
	for range 2 {
		b.sync("done") // Succeeded, terminated, not deleted
	}
	b.deleteWithGrace("del", 30)
	b.sync("del") // terminating
	if err := b.api.Delete(b.ctx, b.pod("forced")); err != nil {
		t.Fatal(err) // force-deleted: its worker is still there, its pod no longer desired
	}
	pods, ready := b.r.PodsForGC(b.ctx)
	want := map[types.UID]bool{"run-uid": false, "done-uid": false, "waiting-uid": false, "del-uid": true, "forced-uid": true}
	if !ready || len(pods) != len(want) {
		t.Fatalf("PodsForGC = %v, %v; want %v, true", pods, ready, want)
	}
	for uid, busy := range want {
		if got, ok := pods[uid]; !ok || got != busy {
			t.Errorf("pod %s: busy %v (known %v), want busy %v", uid, got, ok, busy)
		}
	}
	b.waitKill("del")
	b.sync("del") // terminated, removed from the API, forgotten
	b.sync("forced")
	b.waitKill("forced")
	b.sync("forced")
	pods, _ = b.r.PodsForGC(b.ctx)
	for _, uid := range []types.UID{"del-uid", "forced-uid"} {
		if _, ok := pods[uid]; ok {
			t.Errorf("pod %s still named once removed: %v", uid, pods)
		}
	}
}

func TestBusyForGC(t *testing.T) {
	deleting := bedPod("p")
	deleting.DeletionTimestamp = deleting.CreationTimestamp.DeepCopy()
	for _, tc := range []struct {
		name      string
		stage     lifecycle
		pod       *corev1.Pod
		undesired bool
		want      bool
	}{
		{"syncing", syncing, bedPod("p"), false, false},
		{"syncing, deletion requested", syncing, deleting, false, false},
		{"syncing, no longer desired", syncing, bedPod("p"), true, true},
		{"tracked from the runtime only", syncing, nil, false, true},
		{"terminating", terminating, bedPod("p"), false, true},
		{"terminated, not deleted", terminated, bedPod("p"), false, false},
		{"terminated, being deleted", terminated, deleting, false, true},
		{"terminated, no longer desired", terminated, bedPod("p"), true, true},
	} {
		w := &podWorker{pod: tc.pod}
		w.setState(tc.stage)
		if got := w.busyForGC(tc.undesired); got != tc.want {
			t.Errorf("%s: busy %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The container garbage collector, told by the pod workers which pods are there, removes a crash-looping
// pod's older attempts and their logs, and nothing the pod's status or `kubectl logs --previous` needs
// changes: the restart count, the running attempt, the last termination and its container, and the
// restart count of the next attempt.
func TestContainerGCKeepsWhatTheStatusNeeds(t *testing.T) {
	b := newLifecycleBed(t)
	b.create(bedPod("crash"))
	b.sync("crash")
	b.exit("crash", "app", 1)
	b.sync("crash") // attempt 1, at once
	for _, backoff := range []time.Duration{10 * time.Second, 20 * time.Second} {
		b.exit("crash", "app", 1)
		b.sync("crash")
		b.step(backoff)
		b.sync("crash")
	}
	b.mustRun("crash", "app") // attempt 3; 0, 1 and 2 exited
	logDir := filepath.Join(b.logsDir, "ns_crash_crash-uid", "app")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := os.WriteFile(filepath.Join(logDir, strconv.Itoa(i)+".log"), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := b.pod("crash").Status.ContainerStatuses[0]
	if before.RestartCount != 3 || before.State.Running == nil || before.LastTerminationState.Terminated == nil {
		t.Fatalf("status %+v, want running after 3 restarts", before)
	}
	gc, err := containergc.New(containergc.Options{Runtime: b.cri, Pods: b.r, Clock: b.clk, PodLogsDir: b.logsDir,
		Policy: containergc.Policy{MaxPerPodContainer: 1, MaxContainers: -1}})
	if err != nil {
		t.Fatal(err)
	}
	collect := func() {
		t.Helper()
		if err := gc.GarbageCollect(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	collect()
	if n := len(b.containers("crash")); n != 2 {
		t.Fatalf("%d containers left, want the running attempt and the newest dead one", n)
	}
	if got := logFiles(t, logDir); !slices.Equal(got, []string{"2.log", "3.log"}) {
		t.Errorf("log files left %v, want 2.log and 3.log", got)
	}
	b.sync("crash")
	after := b.pod("crash").Status.ContainerStatuses[0]
	if after.RestartCount != before.RestartCount || after.ContainerID != before.ContainerID ||
		after.LastTerminationState.Terminated.ContainerID != before.LastTerminationState.Terminated.ContainerID {
		t.Errorf("status after collection %+v, want it unchanged from %+v", after, before)
	}
	requireAttempt(t, b, after.LastTerminationState.Terminated.ContainerID) // what --previous reads

	// In back-off, the newest attempt is dead: it alone stays, and the next attempt counts on from it.
	b.exit("crash", "app", 1)
	b.sync("crash")
	collect()
	b.sync("crash")
	st := b.pod("crash").Status.ContainerStatuses[0]
	if n := len(b.containers("crash")); n != 1 || st.RestartCount != 3 || st.State.Waiting == nil ||
		st.LastTerminationState.Terminated == nil {
		t.Fatalf("%d containers, status %+v; want one, waiting after 3 restarts", n, st)
	}
	requireAttempt(t, b, st.LastTerminationState.Terminated.ContainerID)
	b.step(40 * time.Second)
	b.sync("crash")
	b.mustRun("crash", "app")
	if st := b.pod("crash").Status.ContainerStatuses[0]; st.RestartCount != 4 {
		t.Errorf("restart count %d after the next restart, want 4", st.RestartCount)
	}
}

// requireAttempt fails unless the runtime still has the container a status names (runtime://id).
func requireAttempt(t *testing.T, b *lifecycleBed, statusID string) {
	t.Helper()
	for _, c := range b.containers("crash") {
		if strings.HasSuffix(statusID, "://"+c.Id) && c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			return
		}
	}
	t.Errorf("the runtime no longer has the last terminated attempt %s", statusID)
}

func logFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
