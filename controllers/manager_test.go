package controllers_test

import (
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

// TestRESTMapperMapsWhatVolumesRead: the volume manager reads claims, volumes, the CSI objects and
// ClusterTrustBundles by kind;
// the static mapper must know them with their scope, or every read fails with "no matches for kind".
func TestRESTMapperMapsWhatVolumesRead(t *testing.T) {
	cases := map[schema.GroupVersionKind]meta.RESTScopeName{
		corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"):      meta.RESTScopeNameNamespace,
		corev1.SchemeGroupVersion.WithKind("PersistentVolume"):           meta.RESTScopeNameRoot,
		storagev1.SchemeGroupVersion.WithKind("CSINode"):                 meta.RESTScopeNameRoot,
		storagev1.SchemeGroupVersion.WithKind("CSIDriver"):               meta.RESTScopeNameRoot,
		storagev1.SchemeGroupVersion.WithKind("VolumeAttachment"):        meta.RESTScopeNameRoot,
		certificatesv1.SchemeGroupVersion.WithKind("ClusterTrustBundle"): meta.RESTScopeNameRoot,
	}
	for gvk, scope := range cases {
		m, err := controllers.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s: %v", gvk.Kind, err)
			continue
		}
		if m.Scope.Name() != scope {
			t.Errorf("%s: scope %s, want %s", gvk.Kind, m.Scope.Name(), scope)
		}
	}
}
