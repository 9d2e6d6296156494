package staticpods

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodelet/nodelet/podrules"
)

// FuzzDecode: Decode never panics, and what it accepts is a usable static pod, the same on every decode.
// `go test` runs the seeds; CI runs `go test -run=^$ -fuzz=FuzzDecode -fuzztime=20s ./staticpods/`.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(podYAML("web", "nginx:1.27")))
	f.Add([]byte(podListJSON))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"hostNetwork":true,` +
		`"volumes":[{"name":"v"},{"name":"h","hostPath":{"path":"/x"}}],"containers":[{"name":"c","image":"i",` +
		`"ports":[{"containerPort":80,"name":"http"}],"volumeMounts":[{"name":"v","mountPath":"/v"}],` +
		`"resources":{"limits":{"cpu":"1","memory":"1Gi"}},"livenessProbe":{"httpGet":{"port":"http"}}}]}}`))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: &a {name: x, labels: *a}\n"))
	files, err := filepath.Glob("testdata/bad/*")
	if err != nil {
		f.Fatal(err)
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pods, err := Decode(data, testNode, manifestPath)
		if err != nil {
			if pods != nil {
				t.Fatalf("pods with error %v", err)
			}
			return
		}
		again, err := Decode(data, testNode, manifestPath)
		if err != nil || len(again) != len(pods) {
			t.Fatalf("second decode: %d pods, %v", len(again), err)
		}
		for i, pod := range pods {
			switch {
			case pod.Name == "" || pod.Namespace == "" || pod.UID == "":
				t.Fatalf("pod %d without identity: %q/%q uid %q", i, pod.Namespace, pod.Name, pod.UID)
			case podrules.PathSegment("uid", string(pod.UID)) != nil || podrules.PathSegment("name", pod.Name) != nil ||
				podrules.PathSegment("namespace", pod.Namespace) != nil:
				t.Fatalf("pod %d with an identifier that cannot be a path segment: %q/%q uid %q", i, pod.Namespace, pod.Name, pod.UID)
			case pod.Spec.NodeName != testNode:
				t.Fatalf("pod %s: nodeName %q", pod.Name, pod.Spec.NodeName)
			case pod.Annotations[AnnotationConfigHash] != string(pod.UID) || !podrules.IsStaticPod(pod):
				t.Fatalf("pod %s: annotations %v", pod.Name, pod.Annotations)
			case len(pod.Spec.Containers) == 0:
				t.Fatalf("pod %s without containers", pod.Name)
			case again[i].UID != pod.UID:
				t.Fatalf("pod %s: UID %s then %s", pod.Name, pod.UID, again[i].UID)
			}
		}
	})
}
