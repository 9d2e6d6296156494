package staticpods

import "github.com/nodelet/nodelet/podrules"

// Annotations the kubelet puts on static and mirror pods; nodelet uses the same keys. Whether a pod is
// static or a mirror is podrules.IsStaticPod and podrules.IsMirrorPod.
const (
	// AnnotationConfigHash holds the static pod's hash, which is also its UID.
	AnnotationConfigHash = podrules.ConfigHashAnnotation
	// AnnotationConfigSeen holds the RFC3339Nano time this version of the pod was first seen.
	AnnotationConfigSeen = podrules.ConfigSeenAnnotation
	// AnnotationConfigSource names the source of the pod: SourceFile, SourceHTTP (or "api").
	AnnotationConfigSource = podrules.ConfigSourceAnnotation
	// AnnotationConfigMirror marks a mirror pod; its value is the static pod's config hash.
	AnnotationConfigMirror = podrules.ConfigMirrorAnnotation
)

// Values of AnnotationConfigSource for static pods.
const (
	SourceFile = podrules.ConfigSourceFile
	SourceHTTP = podrules.ConfigSourceHTTP
)
