package config

import kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

// ComponentFlagz reports whether the ComponentFlagz gate is on (beta, the default since Kubernetes 1.36):
// the node API then serves /flagz.
func ComponentFlagz(k *kubeletconfigv1beta1.KubeletConfiguration) bool {
	return gateEnabled(k, gateComponentFlagz)
}

// ComponentStatusz reports whether the ComponentStatusz gate is on (beta, the default since Kubernetes
// 1.36): the node API then serves /statusz.
func ComponentStatusz(k *kubeletconfigv1beta1.KubeletConfiguration) bool {
	return gateEnabled(k, gateComponentStatusz)
}

// KubeletInUserNamespace reports whether the KubeletInUserNamespace gate is on (beta, the default since
// Kubernetes 1.37): the Node then reports status.nodeInfo.runningInUserNamespace.
func KubeletInUserNamespace(k *kubeletconfigv1beta1.KubeletConfiguration) bool {
	return gateEnabled(k, gateKubeletInUserNamespace)
}
