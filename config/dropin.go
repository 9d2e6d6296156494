package config

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// dropInSuffix marks the files of --config-dir that are read; others are skipped.
const dropInSuffix = ".conf"

// configDoc is one configuration file as read: what it says (the document as a JSON object, to know
// which fields the user set) and what lenient decoding ignored in it.
type configDoc struct {
	path     string
	fields   map[string]any
	warnings []string
}

// readDoc reads and decodes one KubeletConfiguration file (see Decode) and keeps its fields as written.
func readDoc(path string) (*kubeletconfigv1beta1.KubeletConfiguration, configDoc, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, configDoc{}, fmt.Errorf("reading kubelet config file: %w", err)
	}
	kc, warnings, err := Decode(data)
	if err != nil {
		return nil, configDoc{}, fmt.Errorf("kubelet config file %q: %w", path, err)
	}
	doc := configDoc{path: path, warnings: warnings}
	if err := yaml.Unmarshal(data, &doc.fields); err != nil {
		return nil, configDoc{}, fmt.Errorf("kubelet config file %q: %w", path, err)
	}
	return kc, doc, nil
}

// mergeDropIns merges the drop-in files of dir over base as the kubelet's --config-dir does: each *.conf
// file in dir and its subdirectories, in lexical order, is a JSON merge patch (RFC 7386) over the
// configuration so far, so a drop-in changes only the fields it names and merges into maps such as
// evictionHard. Each must be a kubelet.config.k8s.io/v1beta1 KubeletConfiguration. Relative paths in
// drop-ins stay as written (the kubelet resolves only the --config file's). The kubelet's defaults are
// applied to the result. It returns the merged configuration and the drop-ins read.
func mergeDropIns(base *kubeletconfigv1beta1.KubeletConfiguration, dir string) (*kubeletconfigv1beta1.KubeletConfiguration, []configDoc, error) {
	merged, err := toFields(base)
	if err != nil {
		return nil, nil, err
	}
	var docs []configDoc
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(d.Name()) != dropInSuffix {
			return err
		}
		_, doc, err := readDoc(path)
		if err != nil {
			return fmt.Errorf("drop-in: %w", err)
		}
		docs = append(docs, doc)
		merged = mergePatch(merged, doc.fields)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet config drop-in directory %q: %w", dir, err)
	}
	kc, err := fromFields(merged)
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet config drop-in directory %q: %w", dir, err)
	}
	SetDefaults(kc)
	return kc, docs, nil
}

// toFields is kc as a JSON object.
func toFields(kc *kubeletconfigv1beta1.KubeletConfiguration) (map[string]any, error) {
	data, err := json.Marshal(kc)
	if err != nil {
		return nil, fmt.Errorf("encoding kubelet config: %w", err)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, fmt.Errorf("encoding kubelet config: %w", err)
	}
	return fields, nil
}

// fromFields decodes a JSON object into a KubeletConfiguration, ignoring unknown fields (each drop-in was
// decoded on its own first, which reported them).
func fromFields(fields map[string]any) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	data, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("merging drop-ins: %w", err)
	}
	kc := &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := json.Unmarshal(data, kc); err != nil {
		return nil, fmt.Errorf("merging drop-ins: %w", err)
	}
	return kc, nil
}

// mergePatch applies an RFC 7386 JSON merge patch to target: null removes a field, an object merges into
// an object, anything else replaces.
func mergePatch(target, patch map[string]any) map[string]any {
	if target == nil {
		target = map[string]any{}
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(target, k)
		case map[string]any:
			tv, _ := target[k].(map[string]any)
			target[k] = mergePatch(tv, pv)
		default:
			target[k] = v
		}
	}
	return target
}
