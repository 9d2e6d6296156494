package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PodNodeNameField indexes the pod cache by spec.nodeName.
const PodNodeNameField = "spec.nodeName"

// PodNodeName is the index function for PodNodeNameField.
func PodNodeName(obj client.Object) []string {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil
	}
	return []string{pod.Spec.NodeName}
}
