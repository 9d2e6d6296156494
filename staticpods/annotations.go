package staticpods

import corev1 "k8s.io/api/core/v1"

// Annotations the kubelet puts on static and mirror pods; nodelet uses the same keys.
const (
	// AnnotationConfigHash holds the static pod's hash, which is also its UID.
	AnnotationConfigHash = "kubernetes.io/config.hash"
	// AnnotationConfigSeen holds the RFC3339Nano time this version of the pod was first seen.
	AnnotationConfigSeen = "kubernetes.io/config.seen"
	// AnnotationConfigSource names the source of the pod: SourceFile, SourceHTTP (or "api").
	AnnotationConfigSource = "kubernetes.io/config.source"
	// AnnotationConfigMirror marks a mirror pod; its value is the static pod's config hash.
	AnnotationConfigMirror = "kubernetes.io/config.mirror"
)

// Values of AnnotationConfigSource for static pods.
const (
	SourceFile = "file"
	SourceHTTP = "http"
)

// IsStaticPod reports whether pod came from a manifest file or URL: its config.source annotation is
// "file" or "http". A mirror pod (which carries its static pod's annotations) is not a static pod.
func IsStaticPod(pod *corev1.Pod) bool {
	if pod == nil || IsMirrorPod(pod) {
		return false
	}
	switch pod.Annotations[AnnotationConfigSource] {
	case SourceFile, SourceHTTP:
		return true
	}
	return false
}

// IsMirrorPod reports whether pod is the API server's mirror of a static pod.
func IsMirrorPod(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	_, ok := pod.Annotations[AnnotationConfigMirror]
	return ok
}
