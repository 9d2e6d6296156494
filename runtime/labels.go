package runtime

import "k8s.io/apimachinery/pkg/types"

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

// ContainerKind tells regular, init, sidecar and ephemeral containers apart in the runtime's annotations.
type ContainerKind int

// Container kinds.
const (
	KindRegular ContainerKind = iota
	KindInit
	KindSidecar
	KindEphemeral
)

// PodUIDOf returns the pod UID a sandbox or container belongs to, from its labels.
func PodUIDOf(labels map[string]string) types.UID { return types.UID(labels[LabelPodUID]) }
