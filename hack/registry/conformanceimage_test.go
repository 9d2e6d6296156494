package main

import (
	"archive/tar"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// baseTar writes a small root filesystem tar: a shell and /usr/local/bin.
func baseTar(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "base.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	for _, h := range []tar.Header{
		{Typeflag: tar.TypeDir, Name: "./usr/", Mode: 0o755},
		{Typeflag: tar.TypeDir, Name: "./usr/local/", Mode: 0o755},
		{Typeflag: tar.TypeDir, Name: "./usr/local/bin/", Mode: 0o755},
		{Typeflag: tar.TypeDir, Name: "./bin/", Mode: 0o755},
		{Typeflag: tar.TypeReg, Name: "./bin/sh", Mode: 0o755, Size: 2},
	} {
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte("sh")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// The conformance image is laid out as upstream's: the suite's binaries in /usr/local/bin, go-runner as the
// entrypoint under each of its names, and the suite's default environment.
func TestConformanceImageIsUpstreamsLayout(t *testing.T) {
	bin := t.TempDir()
	for _, b := range []string{"e2e.test", "ginkgo", "go-runner", "kubectl"} {
		if err := os.WriteFile(filepath.Join(bin, b), []byte(b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := conformanceSources{bin: bin, kubectl: filepath.Join(bin, "kubectl"), tag: "v1.37.1"}
	images := map[string]*ociImage{}
	if err := addConformanceImage(images, src, baseTar(t)); err != nil {
		t.Fatal(err)
	}
	if got := served["conformance"]; !slices.Equal(got, []string{"conformance:v1.37.1"}) {
		t.Fatalf("served as %v", got)
	}
	files, cfg := layerFiles(t, images["conformance"])
	for _, f := range []string{"bin/sh", "usr/local/bin/e2e.test", "usr/local/bin/ginkgo", "usr/local/bin/kubectl",
		"usr/local/bin/kubeconformance", "gorunner", "run_e2e.sh"} {
		if _, ok := files[f]; !ok {
			t.Errorf("no %s in the image", f)
		}
	}
	if !slices.Equal(cfg.Entrypoint, []string{"kubeconformance"}) {
		t.Errorf("entrypoint %v", cfg.Entrypoint)
	}
	if !slices.Contains(cfg.Env, "RESULTS_DIR=/tmp/results") || !slices.Contains(cfg.Env, defaultPath) {
		t.Errorf("env %v", cfg.Env)
	}
	for _, bad := range []conformanceSources{{bin: bin, tag: "v1.37.1"}, {bin: bin, kubectl: src.kubectl}} {
		if err := addConformanceImage(map[string]*ociImage{}, bad, baseTar(t)); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := addConformanceImage(map[string]*ociImage{}, src, ""); err == nil {
		t.Error("no base tree accepted")
	}
}
