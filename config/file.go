package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// codecs decodes kubelet.config.k8s.io/v1beta1 documents (YAML or JSON)
// strictly: unknown and duplicate fields are errors, as in the kubelet.
var codecs = newCodecs()

func newCodecs() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	if err := kubeletconfigv1beta1.AddToScheme(scheme); err != nil {
		panic(fmt.Sprintf("registering kubelet config types: %v", err))
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict)
}

// LoadFile reads a KubeletConfiguration file, decodes it strictly, resolves
// relative paths against the file's directory and applies the kubelet's
// defaults. Flags are not considered.
func LoadFile(path string) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("kubelet config file %q: %w", path, err)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("reading kubelet config file: %w", err)
	}
	kc, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("kubelet config file %q: %w", path, err)
	}
	resolveRelativePaths(kc, filepath.Dir(abs))
	SetDefaults(kc)
	return kc, nil
}

// Decode strictly decodes one serialized KubeletConfiguration without
// defaulting it.
func Decode(data []byte) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	if len(data) == 0 {
		return nil, errors.New("file is empty")
	}
	obj, gvk, err := codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		if name := locateBadField(data); name != "" && !runtime.IsStrictDecodingError(err) {
			return nil, fmt.Errorf("decoding field %q: %w", name, err)
		}
		return nil, fmt.Errorf("decoding: %w", err)
	}
	kc, ok := obj.(*kubeletconfigv1beta1.KubeletConfiguration)
	if !ok {
		return nil, fmt.Errorf("unexpected kind %q in %s, want KubeletConfiguration", gvk.Kind, gvk.GroupVersion())
	}
	return kc, nil
}

// configPathRefs lists the path fields the kubelet resolves relative to the
// config file (pkg/kubelet/apis/config.KubeletConfigurationPathRefs).
func configPathRefs(kc *kubeletconfigv1beta1.KubeletConfiguration) []*string {
	refs := []*string{
		&kc.StaticPodPath,
		&kc.Authentication.X509.ClientCAFile,
		&kc.TLSCertFile,
		&kc.TLSPrivateKeyFile,
		&kc.VolumePluginDir,
		&kc.PodLogsDir,
	}
	if kc.ResolverConfig != nil {
		refs = append(refs, kc.ResolverConfig)
	}
	return refs
}

// resolveRelativePaths makes non-empty relative paths absolute against root.
func resolveRelativePaths(kc *kubeletconfigv1beta1.KubeletConfiguration, root string) {
	for _, p := range configPathRefs(kc) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(root, *p)
		}
	}
}

// locateBadField finds the top-level field whose value fails to decode (type
// errors such as an unparseable duration do not name their field). It
// returns "" when no single field is to blame.
func locateBadField(data []byte) string {
	var doc map[string]json.RawMessage
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return ""
	}
	for _, name := range sortedKeys(doc) {
		if name == "apiVersion" || name == "kind" {
			continue
		}
		one, err := json.Marshal(map[string]json.RawMessage{name: doc[name]})
		if err != nil {
			return name
		}
		var kc kubeletconfigv1beta1.KubeletConfiguration
		if err := json.Unmarshal(one, &kc); err != nil {
			return name
		}
	}
	return ""
}
