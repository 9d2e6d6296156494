package controllers_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/controllers"
	"github.com/nodelet/nodelet/podrules"
)

// The pod cache stamps the API source over whatever config.source a pod's creator wrote, and strips
// managedFields.
func TestTransformAPIPod(t *testing.T) {
	in := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "claims", Namespace: "ns",
		Annotations:   map[string]string{podrules.ConfigSourceAnnotation: podrules.ConfigSourceFile},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}}
	out, err := controllers.TransformAPIPod(in)
	if err != nil {
		t.Fatal(err)
	}
	pod := out.(*corev1.Pod)
	if podrules.IsStaticPod(pod) || podrules.IsCriticalPod(pod) {
		t.Errorf("an API pod annotated %s: file is static or critical in the cache: %v", podrules.ConfigSourceAnnotation, pod.Annotations)
	}
	if pod.ManagedFields != nil {
		t.Errorf("managedFields kept: %v", pod.ManagedFields)
	}
	if _, err := controllers.TransformAPIPod(&corev1.Node{}); err != nil {
		t.Errorf("a non-pod object: %v", err)
	}
}
