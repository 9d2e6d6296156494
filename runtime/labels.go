package runtime

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The kubelet's CRI labels and annotations. nodelet writes and reads the same keys, so that a restarted
// agent (or one taking over from a kubelet) rebuilds its view of every pod from the runtime alone.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"

	AnnotationContainerHash             = "io.kubernetes.container.hash"
	AnnotationContainerRestartCount     = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath    = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy  = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationPodDeletionGracePeriod    = "io.kubernetes.pod.deletionGracePeriod"
	AnnotationPodTerminationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationContainerPreStopHandler   = "io.kubernetes.container.preStopHandler"
	AnnotationContainerPorts            = "io.kubernetes.container.ports"
	AnnotationContainerInit             = "io.nodelet.container.init"            // "true" for init containers (incl. sidecars)
	AnnotationContainerRestartableInit  = "io.nodelet.container.restartableInit" // "true" for sidecars
	AnnotationContainerEphemeral        = "io.nodelet.container.ephemeral"       // "true" for ephemeral containers
	AnnotationContainerImageSpec        = "io.nodelet.container.image"           // the image as the pod spec names it
)

// SandboxLabels are the pod's labels plus the kubelet's identifying labels.
func SandboxLabels(pod *corev1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[LabelPodName] = pod.Name
	l[LabelPodNamespace] = pod.Namespace
	l[LabelPodUID] = string(pod.UID)
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
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: containerName,
	}
}

// ContainerKind tells regular, init, sidecar and ephemeral containers apart in the runtime's annotations.
type ContainerKind int

// Container kinds.
const (
	KindRegular ContainerKind = iota
	KindInit
	KindSidecar
	KindEphemeral
)

// ContainerAnnotations carry what the agent needs after a restart: hash, restart count, termination
// message settings, grace periods, preStop handler and ports.
func ContainerAnnotations(pod *corev1.Pod, c *corev1.Container, kind ContainerKind, restartCount int) map[string]string {
	a := map[string]string{
		AnnotationContainerHash:            strconv.FormatUint(HashContainer(c), 16),
		AnnotationContainerRestartCount:    strconv.Itoa(restartCount),
		AnnotationTerminationMessagePath:   c.TerminationMessagePath,
		AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
		AnnotationContainerImageSpec:       c.Image,
	}
	if pod.DeletionGracePeriodSeconds != nil {
		a[AnnotationPodDeletionGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[AnnotationPodTerminationGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if b, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[AnnotationContainerPreStopHandler] = string(b)
		}
	}
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			a[AnnotationContainerPorts] = string(b)
		}
	}
	switch kind {
	case KindInit:
		a[AnnotationContainerInit] = "true"
	case KindSidecar:
		a[AnnotationContainerInit] = "true"
		a[AnnotationContainerRestartableInit] = "true"
	case KindEphemeral:
		a[AnnotationContainerEphemeral] = "true"
	}
	return a
}

// PodUIDOf returns the pod UID a sandbox or container belongs to, from its labels.
func PodUIDOf(labels map[string]string) types.UID { return types.UID(labels[LabelPodUID]) }
