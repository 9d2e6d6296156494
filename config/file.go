package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// strictCodecs decode kubelet.config.k8s.io/v1beta1 documents (YAML or JSON) strictly: unknown and
// duplicate fields are errors. lenientCodecs accept them, as the kubelet's fallback does.
var (
	strictCodecs  = newCodecs(serializer.EnableStrict)
	lenientCodecs = newCodecs()
)

func newCodecs(mutators ...serializer.CodecFactoryOptionsMutator) serializer.CodecFactory {
	scheme := runtime.NewScheme()
	if err := kubeletconfigv1beta1.AddToScheme(scheme); err != nil {
		panic(fmt.Sprintf("registering kubelet config types: %v", err))
	}
	return serializer.NewCodecFactory(scheme, mutators...)
}

// LoadFile reads a KubeletConfiguration file, decodes it as the kubelet does (see Decode), resolves
// relative paths against the file's directory and applies the kubelet's defaults. Flags and drop-ins are
// not considered. The warnings say what lenient decoding ignored.
func LoadFile(path string) (*kubeletconfigv1beta1.KubeletConfiguration, []string, error) {
	kc, doc, err := loadConfigFile(path)
	if err != nil {
		return nil, nil, err
	}
	return kc, doc.warnings, nil
}

func loadConfigFile(path string) (*kubeletconfigv1beta1.KubeletConfiguration, configDoc, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, configDoc{}, fmt.Errorf("kubelet config file %q: %w", path, err)
	}
	kc, doc, err := readDoc(abs)
	if err != nil {
		return nil, configDoc{}, err
	}
	resolveRelativePaths(kc, filepath.Dir(abs))
	SetDefaults(kc)
	return kc, doc, nil
}

// Decode decodes one serialized KubeletConfiguration without defaulting it, as the kubelet does: strictly
// first and, when only strictness fails (an unknown or duplicate field), leniently — the unknown field is
// ignored and the strict error comes back as a warning. Malformed YAML or JSON, a value of the wrong type
// and a wrong apiVersion or kind are errors; a type error names its field.
func Decode(data []byte) (*kubeletconfigv1beta1.KubeletConfiguration, []string, error) {
	if len(data) == 0 {
		return nil, nil, errors.New("file is empty")
	}
	kc, err := decodeWith(strictCodecs, data)
	if err == nil || !runtime.IsStrictDecodingError(err) {
		return kc, nil, err
	}
	kc, lenientErr := decodeWith(lenientCodecs, data)
	if lenientErr != nil {
		return nil, nil, fmt.Errorf("failed lenient decoding: %w", err)
	}
	return kc, []string{err.Error()}, nil
}

func decodeWith(codecs serializer.CodecFactory, data []byte) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	obj, gvk, err := codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		if runtime.IsStrictDecodingError(err) {
			return nil, err
		}
		if name := locateBadField(data); name != "" {
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
