package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// libSetting is a "NAME=${NAME:-value}" default of hack/lib.sh.
func libSetting(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../lib.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + `=\$\{` + name + `:-([^}]+)\}$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s default in hack/lib.sh", name)
	}
	return string(m[1])
}

// moduleDir is a module's folder in the module cache; the test is skipped when it was never downloaded.
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), module)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("%s is not in the module cache (hack/build-testbins.sh and hack/storage.sh download it)", module)
	}
	return dir
}

// servedRef is whether the registry serves ref (an image reference as a manifest writes it) under its name.
func servedRef(ref string) bool {
	for _, prefix := range []string{"registry.k8s.io/", "docker.io/"} {
		ref = strings.TrimPrefix(ref, prefix)
	}
	for _, refs := range served {
		if slices.Contains(refs, ref) {
			return true
		}
	}
	return false
}

func TestServesEveryImageOfTheUpstreamCSIManifests(t *testing.T) {
	dir := moduleDir(t, "k8s.io/kubernetes@"+libSetting(t, "KUBE_VERSION"))
	image := regexp.MustCompile(`(?m)^\s*image:\s*(\S+)`)
	var files []string
	for _, glob := range []string{"hostpath/hostpath/*.yaml", "mock/*.yaml"} {
		m, err := filepath.Glob(filepath.Join(dir, "test/e2e/testing-manifests/storage-csi", glob))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no storage-csi manifests found")
	}
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range image.FindAllSubmatch(b, -1) {
			seen++
			if !servedRef(string(m[1])) {
				t.Errorf("%s names %s, which the registry does not serve", filepath.Base(f), m[1])
			}
		}
	}
	if seen == 0 {
		t.Fatal("the manifests name no image")
	}
}

func TestServesKindsDefaultStorageImages(t *testing.T) {
	dir := moduleDir(t, "sigs.k8s.io/kind@"+libSetting(t, "KIND_VERSION"))
	b, err := os.ReadFile(filepath.Join(dir, "pkg/build/nodeimage/const_storage.go"))
	if err != nil {
		t.Fatal(err)
	}
	consts := regexp.MustCompile(`(?m)^const storage(?:Provisioner|Helper)Image = "([^"]+)"$`).FindAllSubmatch(b, -1)
	if len(consts) != 2 {
		t.Fatalf("found %d storage image constants in kind's const_storage.go, want 2", len(consts))
	}
	for _, c := range consts {
		if !servedRef(string(c[1])) {
			t.Errorf("kind's default storage runs %s, which the registry does not serve", c[1])
		}
	}
}

// layerFiles lists the names in an image's layer and returns its runtime config.
func layerFiles(t *testing.T, img *ociImage) (map[string]tar.Header, v1.Config) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(img.layer))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]tar.Header{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(h.Name, "/")] = *h
	}
	var cfg v1.ConfigFile
	if err := json.Unmarshal(img.config, &cfg); err != nil {
		t.Fatal(err)
	}
	return files, cfg.Config
}

// fakeBins writes a small file per storage binary into a folder, but for the ones left out.
func fakeBins(t *testing.T, leaveOut ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, c := range append([]csiImage{hostpathImage}, distrolessImages...) {
		if slices.Contains(leaveOut, c.bin) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, c.bin), []byte("#!"+c.bin), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestStorageImagesAreBuiltFromTheBinariesThereAre(t *testing.T) {
	for _, tool := range hostpathTools {
		if _, err := os.Stat(tool); err != nil {
			t.Skipf("%s is not on this host (hack/install-deps.sh installs it)", tool)
		}
	}
	root := []entry{dir("bin", 0o755), file("bin/busybox", 0o755, []byte("bb")), symlink("bin/mount", "busybox"),
		symlink("bin/sh", "busybox")}
	images := map[string]*ociImage{}
	if err := addCSIImages(images, root, fakeBins(t, "csi-snapshot-metadata")); err != nil {
		t.Fatal(err)
	}
	if _, ok := images["csi-snapshot-metadata"]; ok {
		t.Error("csi-snapshot-metadata has an image though its binary is missing")
	}

	files, cfg := layerFiles(t, images["csi-provisioner"])
	if !slices.Equal(cfg.Entrypoint, []string{"/csi-provisioner"}) {
		t.Errorf("csi-provisioner's entrypoint is %v, want [/csi-provisioner]", cfg.Entrypoint)
	}
	for _, want := range []string{"csi-provisioner", "etc/passwd", "tmp"} {
		if _, ok := files[want]; !ok {
			t.Errorf("csi-provisioner's image has no %s", want)
		}
	}

	files, cfg = layerFiles(t, images["local-path-provisioner"])
	if _, ok := files["usr/local/bin/local-path-provisioner"]; !ok || !strings.Contains(cfg.Env[0], "/usr/local/bin") {
		t.Errorf("local-path-provisioner is not at /usr/local/bin on the PATH (files %v, env %v)", len(files), cfg.Env)
	}

	files, cfg = layerFiles(t, images["hostpathplugin"])
	if !slices.Equal(cfg.Entrypoint, []string{"/hostpathplugin"}) {
		t.Errorf("hostpathplugin's entrypoint is %v, want [/hostpathplugin]", cfg.Entrypoint)
	}
	for _, tool := range hostpathTools {
		if h, ok := files[tool[1:]]; !ok || h.Typeflag != tar.TypeReg {
			t.Errorf("hostpathplugin's image has no %s from the host", tool)
		}
	}
	if _, ok := files["bin/mount"]; ok {
		t.Error("busybox's mount applet is still in hostpathplugin's image beside util-linux's")
	}
	if _, ok := files["bin/sh"]; !ok {
		t.Error("hostpathplugin's image lost busybox's sh")
	}
	if _, ok := images["local-path-helper"]; !ok {
		t.Error("no local-path helper image")
	}
}
