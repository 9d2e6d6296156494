package server

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// foreignSecret is what the other namespace's container wrote; no request about a pod of namespace
// default may ever answer it.
const foreignSecret = "kube-system secret"

// addForeignPod adds kube-system/etcd (uid u9) whose container app (c9) runs and logs foreignSecret.
func (le *logEnv) addForeignPod(t *testing.T) {
	t.Helper()
	pod := testPod("etcd", "u9")
	pod.Namespace = "kube-system"
	le.pods.add(pod)
	logPath := filepath.Join(le.s.opts.PodLogsDir, "kube-system_etcd_u9", "app", "0.log")
	le.rt.addContainer("c9", "sb9", &pod, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, 9, logPath)
	writeFile(t, logPath, []byte(criLine(le.t0, "stdout", "F", foreignSecret)))
}

// forge replaces the status of default/<name> as a user with pods/status in namespace default could.
func (le *logEnv) forge(name string, status corev1.PodStatus) {
	le.pods.mu.Lock()
	defer le.pods.mu.Unlock()
	for i := range le.pods.pods {
		if le.pods.pods[i].Namespace == "default" && le.pods.pods[i].Name == name {
			le.pods.pods[i].Status = status
		}
	}
}

// forgedStatus names the foreign container c9 as app's current and last attempt.
func forgedStatus(running bool) corev1.PodStatus {
	cs := corev1.ContainerStatus{Name: "app", ContainerID: "containerd://c9",
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ContainerID: "containerd://c9"}}}
	if running {
		cs.State.Running = &corev1.ContainerStateRunning{}
	} else {
		cs.State.Terminated = &corev1.ContainerStateTerminated{ContainerID: "containerd://c9"}
	}
	return corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}
}

// TestContainerLogsIgnoreAForgedContainerID: a container ID written into the pod's status that is not
// one of the pod's own attempts (here another namespace's container) is never read; the pod's own
// attempts are, or the request fails.
func TestContainerLogsIgnoreAForgedContainerID(t *testing.T) {
	le := newLogEnv(t)
	le.addForeignPod(t)
	fresh := testPod("fresh", "u2") // no attempt in the runtime yet
	le.pods.add(fresh)
	for _, tc := range []struct {
		name, path string
		running    bool
		code       int
		want       string
	}{
		{"running", "/containerLogs/default/web/app?tailLines=1", true, 200, "line four\n"},
		{"terminated", "/containerLogs/default/web/app?tailLines=1", false, 200, "line four\n"},
		{"previous", "/containerLogs/default/web/app?previous=true", true, 200, "old attempt\n"},
		{"no attempt", "/containerLogs/default/fresh/app", true, 400, "waiting to start"},
		{"no attempt, previous", "/containerLogs/default/fresh/app?previous=true", true, 400, "previous terminated container"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			le.forge("web", forgedStatus(tc.running))
			le.forge("fresh", forgedStatus(tc.running))
			code, body := le.do("GET", tc.path, "proxy-token")
			if strings.Contains(body, foreignSecret) {
				t.Fatalf("GET %s read the other namespace's container: %q", tc.path, body)
			}
			if code != tc.code || (code == http.StatusOK && body != tc.want) || (code != http.StatusOK && !strings.Contains(body, tc.want)) {
				t.Errorf("GET %s = %d %q, want %d %q", tc.path, code, body, tc.code, tc.want)
			}
		})
	}
	if code, body := le.do("GET", "/containerLogs/kube-system/etcd/app", "proxy-token"); code != 200 || body != foreignSecret+"\n" {
		t.Errorf("the container's own pod = %d %q, want its log", code, body)
	}
}

// selectorBlind is a runtime that answers every container whatever the label selector asks.
type selectorBlind struct{ *fakeRuntime }

func (b selectorBlind) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return b.fakeRuntime.ListContainers(ctx, &runtimeapi.ContainerFilter{State: f.GetState()})
}

// TestContainerLogsIgnoreContainersOfOtherPods: a runtime that ignores the label selector still never
// hands the node API another pod's container.
func TestContainerLogsIgnoreContainersOfOtherPods(t *testing.T) {
	le := newLogEnv(t)
	le.addForeignPod(t)
	le.forge("web", forgedStatus(true))
	le.s.opts.Runtime = selectorBlind{le.rt}
	for _, path := range []string{"/containerLogs/default/web/app?tailLines=1", "/containerLogs/default/web/app?previous=true"} {
		code, body := le.do("GET", path, "proxy-token")
		if strings.Contains(body, foreignSecret) || code != http.StatusOK {
			t.Errorf("GET %s = %d %q, want the pod's own attempt", path, code, body)
		}
	}
}

// TestChooseAttempt is the kubelet's choice of attempt, restricted to the pod container's own attempts.
func TestChooseAttempt(t *testing.T) {
	attempt := func(id string) *runtimeapi.Container { return &runtimeapi.Container{Id: id} }
	two := []*runtimeapi.Container{attempt("c2"), attempt("c1")}
	status := func(cs corev1.ContainerStatus) *corev1.Pod {
		p := testPod("web", "u1")
		cs.Name = "app"
		p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		return &p
	}
	terminated := func(id string) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{ContainerID: id}
	}
	noStatus := testPod("web", "u1")
	waitingAfterC2 := status(corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: terminated("containerd://c2")}})
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		attempts []*runtimeapi.Container
		previous bool
		want     string
		code     int
	}{
		{"no status: newest", &noStatus, two, false, "c2", 0},
		{"no status, previous", &noStatus, two, true, "", 400},
		{"status without a state: newest", status(corev1.ContainerStatus{}), two, false, "c2", 0},
		{"running", status(corev1.ContainerStatus{ContainerID: "containerd://c2", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: terminated("containerd://c1")}}), two, false, "c2", 0},
		{"running, previous", status(corev1.ContainerStatus{ContainerID: "containerd://c2", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: terminated("containerd://c1")}}), two, true, "c1", 0},
		{"crash loop: last terminated", waitingAfterC2, two, false, "c2", 0},
		{"crash loop: previous is the last terminated", waitingAfterC2, two, true, "c2", 0},
		{"forged running ID: newest", status(corev1.ContainerStatus{ContainerID: "containerd://c9", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}), two, false, "c2", 0},
		{"forged previous ID: the one before", status(corev1.ContainerStatus{ContainerID: "containerd://c2", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: terminated("containerd://c9")}}), two, true, "c1", 0},
		{"forged ID, one attempt, previous", status(corev1.ContainerStatus{ContainerID: "containerd://c2", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: terminated("containerd://c9")}}), two[:1], true, "", 400},
		{"forged ID, no attempt", status(corev1.ContainerStatus{ContainerID: "containerd://c9", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}), nil, false, "", 400},
		{"forged ID with another runtime's prefix", status(corev1.ContainerStatus{ContainerID: "docker://c9", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}), two, false, "c2", 0},
		{"waiting, no attempt", status(corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}), nil, false, "", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := chooseAttempt(tc.pod, "app", tc.attempts, tc.previous)
			if tc.code != 0 {
				if err == nil || errorStatus(err) != tc.code {
					t.Fatalf("chooseAttempt = %q %v, want a %d", got, err, tc.code)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("chooseAttempt = %q %v, want %q", got, err, tc.want)
			}
		})
	}
}
