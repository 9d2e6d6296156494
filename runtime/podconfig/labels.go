package podconfig

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/runtime"
)

// SandboxLabels are the pod's labels plus the kubelet's identifying labels.
func SandboxLabels(pod *corev1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[runtime.LabelPodName] = pod.Name
	l[runtime.LabelPodNamespace] = pod.Namespace
	l[runtime.LabelPodUID] = string(pod.UID)
	return l
}

// SandboxAnnotations are the pod's annotations, as the kubelet passes them.
func SandboxAnnotations(pod *corev1.Pod) map[string]string {
	a := make(map[string]string, len(pod.Annotations))
	for k, v := range pod.Annotations {
		a[k] = v
	}
	return a
}

// ContainerLabels identify a container's pod and name.
func ContainerLabels(pod *corev1.Pod, containerName string) map[string]string {
	return map[string]string{
		runtime.LabelPodName:       pod.Name,
		runtime.LabelPodNamespace:  pod.Namespace,
		runtime.LabelPodUID:        string(pod.UID),
		runtime.LabelContainerName: containerName,
	}
}

// ContainerAnnotations carry what the agent needs after a restart: hash, restart count, termination
// message settings, grace periods, preStop handler and ports (runtime.DecodeContainerStatus reads them back).
func ContainerAnnotations(pod *corev1.Pod, c *corev1.Container, kind runtime.ContainerKind, restartCount int) map[string]string {
	a := map[string]string{
		runtime.AnnotationContainerHash:            strconv.FormatUint(HashContainer(c), 16),
		runtime.AnnotationContainerRestartCount:    strconv.Itoa(restartCount),
		runtime.AnnotationTerminationMessagePath:   c.TerminationMessagePath,
		runtime.AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
		runtime.AnnotationContainerImageSpec:       c.Image,
	}
	if pod.DeletionGracePeriodSeconds != nil {
		a[runtime.AnnotationPodDeletionGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[runtime.AnnotationPodTerminationGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if b, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[runtime.AnnotationContainerPreStopHandler] = string(b)
		}
	}
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			a[runtime.AnnotationContainerPorts] = string(b)
		}
	}
	switch kind {
	case runtime.KindInit:
		a[runtime.AnnotationContainerInit] = "true"
	case runtime.KindSidecar:
		a[runtime.AnnotationContainerInit] = "true"
		a[runtime.AnnotationContainerRestartableInit] = "true"
	case runtime.KindEphemeral:
		a[runtime.AnnotationContainerEphemeral] = "true"
	}
	return a
}
