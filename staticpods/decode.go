package staticpods

import (
	"bytes"
	"crypto/md5" //nolint:gosec // a content hash for a UID, as the kubelet's, not a security boundary
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// MaxManifestBytes is the largest manifest file or HTTP response accepted, as the kubelet's maxConfigLength.
const MaxManifestBytes = 10 << 20

// Errors returned (wrapped) by Decode and the sources; check them with errors.Is.
var (
	// ErrTooLarge: the manifest is over its size limit.
	ErrTooLarge = errors.New("manifest too large")
	// ErrMalformed: the bytes are not a v1 Pod or PodList (syntax, kind, apiVersion, unknown field).
	ErrMalformed = errors.New("malformed manifest")
	// ErrInvalidPod: a pod decoded but is not a valid static pod.
	ErrInvalidPod = errors.New("invalid static pod")
)

// strictDecoder decodes JSON into a typed core/v1 object, failing on unknown and duplicate fields.
var strictDecoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Strict: true})
}()

// Decode turns one file's or response's bytes (YAML or JSON holding a v1 Pod or PodList) into defaulted,
// named, validated static pods, as the kubelet's tryDecodeSinglePod/tryDecodePodList and applyDefaults.
// source is the manifest's path, or its URL for the HTTP source ("http://" or "https://"): it enters the
// UID hash and decides the config.source annotation. config.seen is left to the Store. One invalid pod
// in a PodList fails the whole list.
func Decode(data []byte, nodeName, source string) ([]*corev1.Pod, error) {
	return DecodeWith(data, nodeName, source, nil)
}

// UIDFunc returns the UIDs of a manifest's pods, one per pod in manifest order (a pod that names its own
// UID keeps it): kubeletuid.UIDs gives the kubelet's. source is as in Decode; file is false for the HTTP
// source.
type UIDFunc func(data []byte, nodeName, source string, file bool) ([]types.UID, error)

// DecodeWith is Decode with the pods' UIDs from uids (nil: staticpods' own hash of the decoded pod).
func DecodeWith(data []byte, nodeName, source string, uids UIDFunc) ([]*corev1.Pod, error) {
	if len(data) > MaxManifestBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(data), MaxManifestBytes)
	}
	pods, err := decodeObjects(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if uids != nil {
		ids, err := uids(data, nodeName, source, sourceKind(source) == SourceFile)
		if err == nil && len(ids) != len(pods) {
			err = fmt.Errorf("%d UIDs for %d pods", len(ids), len(pods))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: pod UIDs: %w", ErrMalformed, err)
		}
		for i, pod := range pods {
			if pod.UID == "" {
				pod.UID = ids[i]
			}
		}
	}
	for i, pod := range pods {
		name := pod.Name
		if err := prepare(pod, nodeName, source); err != nil {
			return nil, fmt.Errorf("%w%s: %w", ErrInvalidPod, podLabel(name, len(pods), i), err)
		}
	}
	return pods, nil
}

// podLabel names a pod of a manifest in an error: by its name and, in a list, its index.
func podLabel(name string, n, i int) string {
	label := ""
	if name != "" {
		label = fmt.Sprintf(" %q", name)
	}
	if n > 1 {
		label += fmt.Sprintf(" (items[%d])", i)
	}
	return label
}

// decodeObjects parses data as a v1 Pod or PodList, strictly.
func decodeObjects(data []byte) ([]*corev1.Pod, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty manifest")
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, err
	}
	kind, err := manifestKind(js)
	if err != nil {
		return nil, err
	}
	if kind == "Pod" {
		pod := &corev1.Pod{}
		if err := decodeStrict(js, pod); err != nil {
			return nil, err
		}
		return []*corev1.Pod{pod}, nil
	}
	list := &corev1.PodList{}
	if err := decodeStrict(js, list); err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		pods = append(pods, &list.Items[i])
	}
	return pods, nil
}

// manifestKind checks apiVersion and kind before the strict decoding, for errors that name them.
func manifestKind(js []byte) (string, error) {
	var tm struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
	}
	if err := json.Unmarshal(js, &tm); err != nil {
		return "", errors.New("not a Kubernetes object: want a v1 Pod or PodList")
	}
	switch {
	case tm.Kind == nil:
		return "", errors.New("kind is missing: want a v1 Pod or PodList")
	case tm.Kind != "Pod" && tm.Kind != "PodList":
		return "", fmt.Errorf("kind %s (apiVersion %s) is not supported: want a v1 Pod or PodList", quoteAny(tm.Kind), quoteAny(tm.APIVersion))
	case tm.APIVersion == nil:
		return "", errors.New("apiVersion is missing: want \"v1\"")
	case tm.APIVersion != "v1":
		return "", fmt.Errorf("apiVersion %s is not supported for kind %s: want \"v1\"", quoteAny(tm.APIVersion), tm.Kind)
	}
	return tm.Kind.(string), nil
}

func quoteAny(v any) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) > 64 {
		return fmt.Sprintf("(%T)", v)
	}
	return string(b)
}

func decodeStrict(js []byte, into runtime.Object) error {
	_, _, err := strictDecoder.Decode(js, nil, into)
	return err
}

// prepare defaults, names and validates one decoded pod, as the kubelet's applyDefaults followed by the
// API's v1 defaults and the create validation.
func prepare(pod *corev1.Pod, nodeName, source string) error {
	if pod.Name == "" {
		return field.Required(field.NewPath("metadata", "name"), "name is needed for the pod")
	}
	if pod.UID == "" {
		pod.UID = hashPod(pod, nodeName, source)
	}
	setAPIDefaults(pod)
	setStaticDefaults(pod, nodeName, sourceKind(source))
	if errs := validatePod(pod); len(errs) > 0 {
		return errs.ToAggregate()
	}
	return checkAPIReferences(pod)
}

// hashPod is the static pod's UID: an md5 over the pod as decoded (before defaults, so a nodelet upgrade
// that adds a default does not restart static pods), the node and the source.
func hashPod(pod *corev1.Pod, nodeName, source string) types.UID {
	h := md5.New() //nolint:gosec // see the import
	if data, err := json.Marshal(pod); err == nil {
		h.Write(data)
	}
	fmt.Fprintf(h, "host:%s", nodeName)
	fmt.Fprintf(h, "source:%s", source)
	return types.UID(hex.EncodeToString(h.Sum(nil)))
}

// sourceKind tells the HTTP source (an http or https URL) from the file source (a path).
func sourceKind(source string) string {
	lower := strings.ToLower(source)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		return SourceHTTP
	}
	return SourceFile
}
