package server

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// touchingRuntime records every container and sandbox ID the server hands the runtime.
type touchingRuntime struct {
	*fakeRuntime
	mu  sync.Mutex
	ids []string
}

func (r *touchingRuntime) touch(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
}

func (r *touchingRuntime) touched() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

func (r *touchingRuntime) ContainerStatus(ctx context.Context, id string, v bool) (*runtimeapi.ContainerStatusResponse, error) {
	r.touch(id)
	return r.fakeRuntime.ContainerStatus(ctx, id, v)
}

func (r *touchingRuntime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (string, error) {
	r.touch(req.GetContainerId())
	return r.fakeRuntime.Exec(ctx, req)
}

func (r *touchingRuntime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (string, error) {
	r.touch(req.GetContainerId())
	return r.fakeRuntime.Attach(ctx, req)
}

func (r *touchingRuntime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (string, error) {
	r.touch(req.GetPodSandboxId())
	return r.fakeRuntime.PortForward(ctx, req)
}

func (r *touchingRuntime) ExecSync(ctx context.Context, id string, cmd []string, d time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	r.touch(id)
	return r.fakeRuntime.ExecSync(ctx, id, cmd, d)
}

// forgeEverything writes the foreign container's and pod's identity into every status field of default/web
// that a user with pods/status in namespace default controls.
func (le *logEnv) forgeEverything() {
	foreign := corev1.ContainerStatus{Name: "app", ContainerID: "containerd://c9", ImageID: "c9",
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ContainerID: "containerd://c9"}}}
	le.forge("web", corev1.PodStatus{
		ContainerStatuses:          []corev1.ContainerStatus{foreign},
		InitContainerStatuses:      []corev1.ContainerStatus{foreign},
		EphemeralContainerStatuses: []corev1.ContainerStatus{foreign},
		PodIP:                      "10.0.0.9",
	})
}

// TestNoEndpointReachesAnotherNamespace tries, for each node API endpoint that resolves a pod's
// container or sandbox, every other namespace's pod and container through every field a user controls —
// the URL's namespace, pod, UID and container, the query, and a forged pod status — and checks the
// runtime is never handed the other namespace's container (c9) or sandbox (sb9), nor is its output
// answered.
func TestNoEndpointReachesAnotherNamespace(t *testing.T) {
	le := newLogEnv(t)
	le.addUser("proxy-token", "proxier", "create proxy", "get proxy")
	le.addForeignPod(t)
	le.rt.streamURL = "http://127.0.0.1:1"
	le.rt.sandboxes = []*runtimeapi.PodSandbox{
		{Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{"io.kubernetes.pod.uid": "u1"}},
		{Id: "sb9", State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{"io.kubernetes.pod.uid": "u9"}},
	}
	le.rt.execSync = func(id string, _ []string) *runtimeapi.ExecSyncResponse {
		return &runtimeapi.ExecSyncResponse{Stdout: []byte("ran in " + id)}
	}
	rt := &touchingRuntime{fakeRuntime: le.rt}
	le.s.opts.Runtime = rt
	le.forgeEverything()
	var paths []string
	for _, target := range []string{"default/web", "default/web/u9", "default/etcd", "default/etcd/u9"} {
		for _, c := range []string{"app", "etcd", "c9"} {
			paths = append(paths,
				"GET /containerLogs/"+target+"/"+c, "GET /containerLogs/"+target+"/"+c+"?previous=true",
				"POST /exec/"+target+"/"+c+"?command=cat&output=1", "POST /attach/"+target+"/"+c+"?output=1",
				"POST /run/"+target+"/"+c+"?cmd=cat")
		}
		paths = append(paths, "POST /portForward/"+target+"?port=80")
	}
	for _, p := range paths {
		if strings.HasPrefix(p, "GET /containerLogs/default/web/u9") || strings.HasPrefix(p, "GET /containerLogs/default/etcd/u9") {
			continue // containerLogs has no UID form: the segment would be the container name
		}
		method, path, _ := strings.Cut(p, " ")
		_, body := le.do(method, path, "proxy-token")
		if strings.Contains(body, foreignSecret) || strings.Contains(body, "c9") && !strings.Contains(body, `"c9"`) {
			t.Errorf("%s answered the other namespace's container: %q", p, body)
		}
		for _, id := range rt.touched() {
			if id == "c9" || id == "sb9" {
				t.Fatalf("%s handed the runtime kube-system's %s (calls: %v)", p, id, rt.touched())
			}
		}
	}
	if len(rt.touched()) == 0 {
		t.Fatal("no request reached the runtime: the test proves nothing")
	}
}
