// Package imagepull is the kubelet's image pull credential verification (the KubeletEnsureSecretPulledImages
// feature, on by default since Kubernetes 1.35): which images already on the node a pod may use without
// pulling them again with its own credentials.
//
// It owns the four verification policies of imagePullCredentialsVerificationPolicy and the allowlist
// patterns of preloadedImagesVerificationAllowlist; the pull intents and pulled records kept on disk under
// <root-dir>/image_manager in the kubelet's own format (kubelet.config.k8s.io/v1beta1 ImagePullIntent and
// ImagePulledRecord, files named sha256-<hex of the key>), so a node handed over between the kubelet and
// nodelet keeps its records; and the decision whether a pod must pull an image that is present.
//
// It must not call the CRI or the API server: the caller passes what the runtime and the pod's Secrets say.
package imagepull
