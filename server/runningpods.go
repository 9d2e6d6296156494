package server

import (
	"net/http"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
)

// runningPods answers /runningpods/ as the kubelet: the pods the runtime runs — a ready sandbox or a running
// container — rebuilt from the runtime's labels alone (name, namespace, UID, each running container's name and
// image), whatever the API server says, as a v1 PodList.
func (s *Server) runningPods(w http.ResponseWriter, r *http.Request) {
	sandboxes, err := s.opts.Runtime.ListPodSandbox(r.Context(), &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	containers, err := s.opts.Runtime.ListContainers(r.Context(), &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []corev1.Pod{}}
	index := map[types.UID]int{}
	pod := func(labels map[string]string) *corev1.Pod {
		uid := runtime.PodUIDOf(labels)
		i, ok := index[uid]
		if !ok {
			i = len(list.Items)
			index[uid] = i
			list.Items = append(list.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid,
				Name: labels[runtime.LabelPodName], Namespace: labels[runtime.LabelPodNamespace]}})
		}
		return &list.Items[i]
	}
	for _, sb := range sandboxes {
		pod(sb.GetLabels())
	}
	for _, c := range containers {
		p := pod(c.GetLabels())
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name: c.GetLabels()[runtime.LabelContainerName], Image: c.GetImage().GetImage()})
	}
	writeJSON(r.Context(), w, list)
}
