package staticpods

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
)

const manifestPath = "/etc/kubernetes/manifests/web.yaml"

func decodeOne(t *testing.T, data, node, source string) *corev1.Pod {
	t.Helper()
	pods, err := Decode([]byte(data), node, source)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if len(pods) != 1 {
		t.Fatalf("Decode gave %d pods, want 1", len(pods))
	}
	return pods[0]
}

func TestDecodeNamingAndAnnotations(t *testing.T) {
	pod := decodeOne(t, podYAML("web", "nginx:1.27"), testNode, manifestPath)
	if pod.Name != "web-node-1" || pod.Namespace != "kube-system" {
		t.Errorf("name = %s/%s, want kube-system/web-node-1 (node name lower-cased)", pod.Namespace, pod.Name)
	}
	if pod.Spec.NodeName != testNode {
		t.Errorf("spec.nodeName = %q, want %q", pod.Spec.NodeName, testNode)
	}
	if len(pod.UID) != 32 {
		t.Errorf("UID = %q, want 32 hex digits", pod.UID)
	}
	want := map[string]string{AnnotationConfigHash: string(pod.UID), AnnotationConfigSource: SourceFile}
	for k, v := range want {
		if pod.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, pod.Annotations[k], v)
		}
	}
	if _, ok := pod.Annotations[AnnotationConfigSeen]; ok {
		t.Errorf("Decode set %s; the Store owns it", AnnotationConfigSeen)
	}
	if !podrules.IsStaticPod(pod) || podrules.IsMirrorPod(pod) {
		t.Errorf("IsStaticPod = %v, IsMirrorPod = %v; want true, false", podrules.IsStaticPod(pod), podrules.IsMirrorPod(pod))
	}
	if pod.Status.Phase != corev1.PodPending {
		t.Errorf("phase = %q, want Pending", pod.Status.Phase)
	}
	noExecute := corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	if len(pod.Spec.Tolerations) != 1 || pod.Spec.Tolerations[0] != noExecute {
		t.Errorf("tolerations = %v, want only %v", pod.Spec.Tolerations, noExecute)
	}
}

func TestDecodeDefaultNamespaceAndHTTPSource(t *testing.T) {
	data := strings.Replace(podYAML("web", "nginx:1.27"), "  namespace: kube-system\n", "", 1)
	pod := decodeOne(t, data, testNode, "https://config.example/pods")
	if pod.Namespace != "default" {
		t.Errorf("namespace = %q, want default", pod.Namespace)
	}
	if pod.Annotations[AnnotationConfigSource] != SourceHTTP {
		t.Errorf("config.source = %q, want http", pod.Annotations[AnnotationConfigSource])
	}
	if len(pod.Spec.Tolerations) != 0 {
		t.Errorf("tolerations = %v: the kubelet adds the NoExecute toleration to file pods only", pod.Spec.Tolerations)
	}
}

func TestDecodeUIDHash(t *testing.T) {
	base := decodeOne(t, podYAML("web", "nginx:1.27"), testNode, manifestPath).UID
	asJSON := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"kube-system",` +
		`"labels":{"tier":"control-plane"}},"spec":{"containers":[{"name":"main","image":"nginx:1.27"}]}}`
	tests := []struct {
		name, data, node, source string
		same                     bool
	}{
		{"same content", podYAML("web", "nginx:1.27"), testNode, manifestPath, true},
		{"same object as JSON", asJSON, testNode, manifestPath, true},
		{"changed image", podYAML("web", "nginx:1.28"), testNode, manifestPath, false},
		{"another node", podYAML("web", "nginx:1.27"), "node-2", manifestPath, false},
		{"another file", podYAML("web", "nginx:1.27"), testNode, "/etc/kubernetes/manifests/other.yaml", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			uid := decodeOne(t, tt.data, tt.node, tt.source).UID
			if (uid == base) != tt.same {
				t.Errorf("UID %s vs %s: same = %v, want %v", uid, base, uid == base, tt.same)
			}
		})
	}
}

func TestDecodeKeepsManifestUID(t *testing.T) {
	data := strings.Replace(podYAML("web", "nginx:1.27"), "  name: web\n", "  name: web\n  uid: fixed-uid\n", 1)
	pod := decodeOne(t, data, testNode, manifestPath)
	if pod.UID != "fixed-uid" || pod.Annotations[AnnotationConfigHash] != "fixed-uid" {
		t.Errorf("UID = %q, hash = %q; the kubelet keeps a manifest's UID", pod.UID, pod.Annotations[AnnotationConfigHash])
	}
}

func TestDecodeAPIDefaults(t *testing.T) {
	const data = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  hostNetwork: true
  volumes:
  - name: scratch
  - name: host
    hostPath:
      path: /var/log
  containers:
  - name: main
    image: nginx:1.27
    ports:
    - containerPort: 8080
    resources:
      limits:
        cpu: 500m
        memory: 128Mi
      requests:
        cpu: 100m
    livenessProbe:
      httpGet:
        port: 8080
`
	pod := decodeOne(t, data, testNode, manifestPath)
	spec, c := pod.Spec, pod.Spec.Containers[0]
	checks := []struct {
		field     string
		got, want any
	}{
		{"restartPolicy", spec.RestartPolicy, corev1.RestartPolicyAlways},
		{"dnsPolicy", spec.DNSPolicy, corev1.DNSClusterFirst},
		{"terminationGracePeriodSeconds", *spec.TerminationGracePeriodSeconds, int64(30)},
		{"schedulerName", spec.SchedulerName, "default-scheduler"},
		{"securityContext", spec.SecurityContext != nil, true},
		{"enableServiceLinks", *spec.EnableServiceLinks, true},
		{"volumes[0] emptyDir", spec.Volumes[0].EmptyDir != nil, true},
		{"volumes[1].hostPath.type", *spec.Volumes[1].HostPath.Type, corev1.HostPathUnset},
		{"terminationMessagePath", c.TerminationMessagePath, "/dev/termination-log"},
		{"terminationMessagePolicy", c.TerminationMessagePolicy, corev1.TerminationMessageReadFile},
		{"imagePullPolicy", c.ImagePullPolicy, corev1.PullIfNotPresent},
		{"ports[0].protocol", c.Ports[0].Protocol, corev1.ProtocolTCP},
		{"ports[0].hostPort (hostNetwork)", c.Ports[0].HostPort, int32(8080)},
		{"requests.cpu kept", c.Resources.Requests.Cpu().String(), "100m"},
		{"requests.memory from limit", c.Resources.Requests.Memory().String(), "128Mi"},
		{"probe timeoutSeconds", c.LivenessProbe.TimeoutSeconds, int32(1)},
		{"probe periodSeconds", c.LivenessProbe.PeriodSeconds, int32(10)},
		{"probe successThreshold", c.LivenessProbe.SuccessThreshold, int32(1)},
		{"probe failureThreshold", c.LivenessProbe.FailureThreshold, int32(3)},
		{"probe httpGet.scheme", c.LivenessProbe.HTTPGet.Scheme, corev1.URISchemeHTTP},
		{"probe httpGet.path", c.LivenessProbe.HTTPGet.Path, "/"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.field, ch.got, ch.want)
		}
	}
}

func TestDecodeNegativeGracePeriod(t *testing.T) {
	data := strings.Replace(podYAML("web", "nginx:1.27"), "spec:\n", "spec:\n  terminationGracePeriodSeconds: -5\n", 1)
	if got := decodeOne(t, data, testNode, manifestPath).Spec.TerminationGracePeriodSeconds; !ptrEq(got, 1) {
		t.Errorf("terminationGracePeriodSeconds = %v, want 1 (the API's default for a negative value)", got)
	}
}

func ptrEq(p *int64, v int64) bool { return p != nil && *p == v }

func TestPullPolicyByTag(t *testing.T) {
	tests := map[string]corev1.PullPolicy{
		"nginx":                          corev1.PullAlways,
		"nginx:latest":                   corev1.PullAlways,
		"nginx:1.27":                     corev1.PullIfNotPresent,
		"registry.local:5000/nginx":      corev1.PullAlways,
		"registry.local:5000/nginx:1.27": corev1.PullIfNotPresent,
		"nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef":        corev1.PullIfNotPresent,
		"nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": corev1.PullAlways,
	}
	for image, want := range tests {
		if got := pullPolicyFor(image); got != want {
			t.Errorf("pullPolicyFor(%q) = %s, want %s", image, got, want)
		}
	}
}

func TestDecodePodList(t *testing.T) {
	const data = `{"apiVersion":"v1","kind":"PodList","items":[
 {"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}},
 {"metadata":{"name":"b"},"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}}]}`
	pods, err := Decode([]byte(data), testNode, "http://config.example/pods")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 || pods[0].Name != "a-node-1" || pods[1].Name != "b-node-1" {
		t.Fatalf("pods = %v, want a-node-1 and b-node-1", podNames(pods))
	}
	if pods[0].UID == pods[1].UID {
		t.Errorf("both pods have UID %s", pods[0].UID)
	}
}

func podNames(pods []*corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}.String())
	}
	return names
}

func TestDecodeTooLarge(t *testing.T) {
	data := append([]byte(podYAML("web", "nginx:1.27")), bytes.Repeat([]byte("#"), MaxManifestBytes)...)
	if _, err := Decode(data, testNode, manifestPath); !errors.Is(err, ErrTooLarge) {
		t.Errorf("err = %v, want ErrTooLarge", err)
	}
}

func TestDecodeLimitsOverRequests(t *testing.T) {
	data := strings.Replace(podYAML("web", "nginx:1.27"), "    image: nginx:1.27\n",
		"    image: nginx:1.27\n    resources:\n      requests: {memory: 1Gi}\n      limits: {memory: 1Mi}\n", 1)
	_, err := Decode([]byte(data), testNode, manifestPath)
	if !errors.Is(err, ErrInvalidPod) || !strings.Contains(err.Error(), "spec.containers[0].resources.requests[memory]") {
		t.Errorf("err = %v, want an invalid requests[memory]", err)
	}
}

// TestBadCorpus runs every committed broken manifest: each fails with an error naming its problem.
func TestBadCorpus(t *testing.T) {
	tests := map[string]struct {
		kind      error
		fragments []string
	}{
		"syntax-error.yaml":              {ErrMalformed, []string{"yaml: line"}},
		"wrong-kind.yaml":                {ErrMalformed, []string{`kind "Deployment"`, "want a v1 Pod or PodList"}},
		"wrong-apiversion.yaml":          {ErrMalformed, []string{`apiVersion "v2"`}},
		"missing-kind.yaml":              {ErrMalformed, []string{"kind is missing"}},
		"missing-name.yaml":              {ErrInvalidPod, []string{"metadata.name", "name is needed"}},
		"no-containers.yaml":             {ErrInvalidPod, []string{"spec.containers", "at least one container"}},
		"invalid-pod-name.yaml":          {ErrInvalidPod, []string{"metadata.name", "Web_Server-node-1"}},
		"invalid-namespace.yaml":         {ErrInvalidPod, []string{"metadata.namespace", "kube.system"}},
		"traversal-uid.yaml":             {ErrInvalidPod, []string{"metadata.uid", "../../..", "path separator"}},
		"invalid-container-name.yaml":    {ErrInvalidPod, []string{"spec.containers[0].name", "Web.Server"}},
		"duplicate-container-names.yaml": {ErrInvalidPod, []string{"spec.containers[0].name", "Duplicate", `"web"`}},
		"missing-image.yaml":             {ErrInvalidPod, []string{"spec.containers[0].image", "Required"}},
		"bad-port.yaml":                  {ErrInvalidPod, []string{"spec.containers[0].ports[0].containerPort", "70000"}},
		"duplicate-port-names.yaml":      {ErrInvalidPod, []string{"spec.containers[0].ports[1].name", "Duplicate"}},
		"duplicate-volume-names.yaml":    {ErrInvalidPod, []string{"spec.volumes[1].name", "Duplicate"}},
		"mount-unknown-volume.yaml":      {ErrInvalidPod, []string{"spec.containers[0].volumeMounts[0].name", "Not found"}},
		"bad-restart-policy.yaml":        {ErrInvalidPod, []string{"spec.restartPolicy", "Sometimes"}},
		"unknown-field.yaml":             {ErrMalformed, []string{`unknown field "spec.containers[0].imagePullPolicyy"`}},
		"duplicate-field.yaml":           {ErrMalformed, []string{`"image" already set`}},
		"secret-reference.yaml":          {ErrInvalidPod, []string{"spec.volumes[0].secret", "may not reference secrets"}},
		"podlist-one-invalid.json":       {ErrInvalidPod, []string{`"bad" (items[1])`, "spec.containers[0].image"}},
		"not-an-object.json":             {ErrMalformed, []string{"not a Kubernetes object"}},
		"empty.yaml":                     {ErrMalformed, []string{"empty manifest"}},
		"garbage.bin":                    {ErrMalformed, []string{"yaml"}},
	}
	files, err := filepath.Glob("testdata/bad/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(tests) {
		t.Errorf("testdata/bad has %d files, the table %d: keep them in step", len(files), len(tests))
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			tt, ok := tests[name]
			if !ok {
				t.Fatalf("no expectation for %s", name)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			pods, err := Decode(data, testNode, path)
			if !errors.Is(err, tt.kind) || !containsAll(err.Error(), tt.fragments...) {
				t.Fatalf("err = %v; want %v naming %q", err, tt.kind, tt.fragments)
			}
			if pods != nil {
				t.Errorf("pods = %v with an error", podNames(pods))
			}
		})
	}
}

// TestGarbageCorpusDeterministic keeps testdata/bad/garbage.bin the output of garbage(); regenerate it
// with STATICPODS_WRITE_CORPUS=1.
func TestGarbageCorpusDeterministic(t *testing.T) {
	const path = "testdata/bad/garbage.bin"
	if os.Getenv("STATICPODS_WRITE_CORPUS") == "1" {
		if err := os.WriteFile(path, garbage(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, garbage()) {
		t.Errorf("%s differs from garbage(); regenerate it with STATICPODS_WRITE_CORPUS=1", path)
	}
}

// DecodeWith takes the UIDs a UIDFunc computes (the file flag telling a path from a URL), keeps a UID the
// manifest names, and refuses the manifest when the function fails or miscounts.
func TestDecodeWithUIDFunc(t *testing.T) {
	var gotFile bool
	web := podYAML("web", "nginx:1.27")
	uids := func(_ []byte, node, source string, file bool) ([]types.UID, error) {
		gotFile = file
		return []types.UID{types.UID("uid-" + node)}, nil
	}
	pods, err := DecodeWith([]byte(web), "node-1", manifestPath, uids)
	if err != nil || pods[0].UID != "uid-node-1" || pods[0].Annotations[AnnotationConfigHash] != "uid-node-1" || !gotFile {
		t.Fatalf("DecodeWith = %v, %v (file %v)", pods, err, gotFile)
	}
	if _, err := DecodeWith([]byte(web), "node-1", "https://example.com/pods", uids); err != nil || gotFile {
		t.Errorf("HTTP source: err %v, file %v", err, gotFile)
	}
	own := strings.Replace(web, "name: web", "name: web\n  uid: 0123-own", 1)
	if pods, err := DecodeWith([]byte(own), "node-1", manifestPath, uids); err != nil || pods[0].UID != "0123-own" {
		t.Errorf("a manifest's own UID: %v, %v", pods, err)
	}
	miscount := func([]byte, string, string, bool) ([]types.UID, error) { return nil, nil }
	if _, err := DecodeWith([]byte(web), "node-1", manifestPath, miscount); !errors.Is(err, ErrMalformed) {
		t.Errorf("a UIDFunc with no UID for the pod: err %v, want ErrMalformed", err)
	}
}
