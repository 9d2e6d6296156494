package main

import (
	"archive/tar"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
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

// -push prints and writes the digest a registry then serves, and -pin rewrites a kustomization to that
// repository and digest, tag gone.
func TestPushPinsTheDigest(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	bin, ca := filepath.Join(dir, "nodelet"), filepath.Join(dir, "ca.crt")
	for _, f := range []string{bin, ca} {
		if err := os.WriteFile(f, []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kust := filepath.Join(dir, "kustomization.yaml")
	if err := os.WriteFile(kust, []byte("# pinned\nimages:\n- name: nodelet\n  newName: example.org/nodelet\n  newTag: latest\nresources:\n- base\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	digestFile := filepath.Join(dir, "digest")
	o, err := parseFlags([]string{"-bin", "linux/amd64=" + bin, "-ca-certificates", ca, "-push", "127.0.0.1" + strings.TrimPrefix(host, "127.0.0.1") + "/nodelet:v1",
		"-digest-file", digestFile, "-pin", kust})
	if err != nil {
		t.Fatal(err)
	}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(digestFile)
	if err != nil {
		t.Fatal(err)
	}
	digest := strings.TrimSpace(string(raw))
	ref, err := name.ParseReference(host+"/nodelet@"+digest, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Image(ref); err != nil {
		t.Errorf("the registry does not serve the printed digest %s: %v", digest, err)
	}
	got, err := os.ReadFile(kust)
	if err != nil {
		t.Fatal(err)
	}
	want := "# pinned\nimages:\n- name: nodelet\n  newName: " + host + "/nodelet\n  digest: " + digest + "\nresources:\n- base\n"
	if string(got) != want {
		t.Errorf("pinned kustomization:\n%s\nwant:\n%s", got, want)
	}
}

// deploy/ runs the image it names by digest, never by a tag that can move, and pulls it Always.
func TestDeployPinsByDigest(t *testing.T) {
	kust, err := os.ReadFile("../../deploy/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^  digest: sha256:[0-9a-f]{64}$`).Match(kust) || strings.Contains(string(kust), "newTag:") {
		t.Errorf("deploy/kustomization.yaml does not pin nodelet's image by digest:\n%s", kust)
	}
	ds, err := os.ReadFile("../../deploy/base/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ds), "imagePullPolicy: Always") {
		t.Error("the DaemonSet does not pull its image Always")
	}
}
