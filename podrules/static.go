package podrules

import corev1 "k8s.io/api/core/v1"

// Annotations the kubelet sets on the pods of its file and URL sources and on their mirror pods.
const (
	// ConfigSourceAnnotation names the source a pod came from: ConfigSourceFile, ConfigSourceHTTP or
	// ConfigSourceAPI.
	ConfigSourceAnnotation = "kubernetes.io/config.source"
	// ConfigHashAnnotation holds a static pod's hash (also its UID); its mirror pod repeats it.
	ConfigHashAnnotation = "kubernetes.io/config.hash"
	// ConfigMirrorAnnotation marks a mirror pod; its value is the config hash of the static pod it mirrors.
	ConfigMirrorAnnotation = corev1.MirrorPodAnnotationKey
	// ConfigSeenAnnotation holds the RFC3339Nano time a static pod's source first gave this version of it.
	ConfigSeenAnnotation = "kubernetes.io/config.seen"
)

// Values of ConfigSourceAnnotation.
const (
	ConfigSourceFile = "file"
	ConfigSourceHTTP = "http"
	ConfigSourceAPI  = "api"
)

// MarkFromAPI stamps pod as read from the API server, as the kubelet's config merge annotates every pod
// with the source it came from. Whoever creates an API pod may write any config.source annotation on it; the
// stamp replaces that claim, so that whether a pod is static is decided only by the source the agent itself
// assigned (the static pod sources stamp "file" or "http"). Every pod read from the API goes through it.
func MarkFromAPI(pod *corev1.Pod) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[ConfigSourceAnnotation] = ConfigSourceAPI
}

// IsStaticPod reports whether pod came from a manifest file or URL rather than the API server (the
// kubelet's kubetypes.IsStaticPod: a config.source annotation other than "api"). A mirror pod is the API's
// copy of a static pod, not a static pod: it carries its static pod's annotations, but the kubelet sees it
// through its API source.
func IsStaticPod(pod *corev1.Pod) bool {
	if pod == nil || IsMirrorPod(pod) {
		return false
	}
	src, ok := pod.Annotations[ConfigSourceAnnotation]
	return ok && src != ConfigSourceAPI
}

// IsMirrorPod reports whether pod is the API server's mirror of a static pod (the kubelet's
// kubetypes.IsMirrorPod: it has the config.mirror annotation).
func IsMirrorPod(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	_, ok := pod.Annotations[ConfigMirrorAnnotation]
	return ok
}

// IsMirrorOf reports whether mirror is the mirror pod of static as it is now (the kubelet's IsMirrorPodOf):
// a mirror pod of the same name and namespace whose config.mirror annotation holds the static pod's
// config hash. A mirror of an older version of the static pod is not.
func IsMirrorOf(mirror, static *corev1.Pod) bool {
	if !IsMirrorPod(mirror) || static == nil || mirror.Name != static.Name || mirror.Namespace != static.Namespace {
		return false
	}
	return mirror.Annotations[ConfigMirrorAnnotation] == static.Annotations[ConfigHashAnnotation]
}
