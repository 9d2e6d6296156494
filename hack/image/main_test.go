package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestImageTarball(t *testing.T) {
	dir := t.TempDir()
	bin, ca := filepath.Join(dir, "nodelet"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	o, err := parseFlags([]string{"-bin", "linux/arm64=" + bin, "-ca-certificates", ca, "-tar", out, "-tag", "nodelet:test", "-version", "v9"})
	if err != nil {
		t.Fatal(err)
	}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Architecture != "arm64" || cfg.OS != "linux" || cfg.Config.Entrypoint[0] != "/usr/local/bin/nodelet" ||
		cfg.Config.Labels["org.opencontainers.image.version"] != "v9" {
		t.Errorf("config: %+v", cfg)
	}
	files := layerFiles(t, img)
	if files["usr/local/bin/nodelet"] != "#!binary" || files["etc/ssl/certs/ca-certificates.crt"] == "" {
		t.Errorf("layer files: %v", files)
	}
	// The same inputs give the same image, and the tarball holds it.
	p := v1.Platform{OS: "linux", Architecture: "arm64"}
	a, err := build(bin, []byte("-----BEGIN CERTIFICATE-----"), p, "v9")
	if err != nil {
		t.Fatal(err)
	}
	b, err := build(bin, []byte("-----BEGIN CERTIFICATE-----"), p, "v9")
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	cfgA, _ := a.ConfigName()
	ct, _ := img.ConfigName()
	if da != db || cfgA != ct {
		t.Errorf("not reproducible: digests %s %s, configs %s (tarball %s)", da, db, cfgA, ct)
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{{}, {"-bin", "amd64=x", "-tar", "o"}, {"-bin", "linux/amd64=a,linux/arm64=b", "-tar", "o"}} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%v): no error", args)
		}
	}
}

func layerFiles(t *testing.T, img v1.Image) map[string]string {
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %v %d", err, len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	files := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = string(b)
	}
}
