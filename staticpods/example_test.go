package staticpods_test

import (
	"fmt"

	"github.com/nodelet/nodelet/staticpods"
)

func ExampleDecode() {
	manifest := []byte(`
apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
spec:
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.6.0-0
`)
	pods, err := staticpods.Decode(manifest, "Control-Plane-1", "/etc/kubernetes/manifests/etcd.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	pod := pods[0]
	fmt.Println(pod.Namespace + "/" + pod.Name)
	fmt.Println(pod.Spec.NodeName, pod.Annotations[staticpods.AnnotationConfigSource], pod.Spec.RestartPolicy)
	fmt.Println(pod.Annotations[staticpods.AnnotationConfigHash] == string(pod.UID))

	_, err = staticpods.Decode([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containerz: []}\n"), "n", "/m/x.yaml")
	fmt.Println(err)
	// Output:
	// kube-system/etcd-control-plane-1
	// Control-Plane-1 file Always
	// true
	// malformed manifest: strict decoding error: unknown field "spec.containerz"
}
