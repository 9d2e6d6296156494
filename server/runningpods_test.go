package server

import (
	"encoding/json"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// /runningpods/ lists what the runtime runs, as the kubelet: a pod per ready sandbox or running container, with
// its running containers' names and images, from the runtime's labels; exited containers and stopped sandboxes
// are not there. It needs nodes/pods (or nodes/proxy).
func TestRunningPodsComeFromTheRuntime(t *testing.T) {
	e := newEnv(t)
	e.addUser("pods-token", "viewer", "get pods")
	e.addUser("stats-token", "scraper", "get stats")
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"}}
	done := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "done", UID: "uid-done"}}
	e.rt.addContainer("c1", "sb-web", web, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, 1, "")
	e.rt.containers["c1"].Image = &runtimeapi.ImageSpec{Image: "sha256:abc"}
	e.rt.addContainer("c2", "sb-web", web, "init", runtimeapi.ContainerState_CONTAINER_EXITED, 1, "")
	e.rt.addContainer("c3", "sb-done", done, "job", runtimeapi.ContainerState_CONTAINER_EXITED, 1, "")
	sandbox := func(id string, p *corev1.Pod, state runtimeapi.PodSandboxState) *runtimeapi.PodSandbox {
		return &runtimeapi.PodSandbox{Id: id, State: state, Labels: map[string]string{"io.kubernetes.pod.name": p.Name,
			"io.kubernetes.pod.namespace": p.Namespace, "io.kubernetes.pod.uid": string(p.UID)}}
	}
	e.rt.sandboxes = []*runtimeapi.PodSandbox{sandbox("sb-web", web, runtimeapi.PodSandboxState_SANDBOX_READY),
		sandbox("sb-done", done, runtimeapi.PodSandboxState_SANDBOX_NOTREADY)}
	code, body := e.do("GET", "/runningpods/", "pods-token")
	if code != http.StatusOK {
		t.Fatalf("GET /runningpods/ = %d %q", code, body)
	}
	var list corev1.PodList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "PodList" || len(list.Items) != 1 {
		t.Fatalf("running pods %s, want a PodList of web alone", body)
	}
	p := list.Items[0]
	if p.Name != "web" || p.Namespace != "ns" || p.UID != "uid-web" || len(p.Spec.Containers) != 1 ||
		p.Spec.Containers[0].Name != "app" || p.Spec.Containers[0].Image != "sha256:abc" {
		t.Errorf("running pod %+v, want ns/web with its running container app", p)
	}
	if code, _ := e.do("GET", "/runningpods/", "stats-token"); code != http.StatusForbidden {
		t.Errorf("GET /runningpods/ without nodes/pods = %d, want 403", code)
	}
}
