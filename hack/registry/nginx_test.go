package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The e2e suite of the bed's Kubernetes version names its nginx images in test/utils/image/manifest.go.
func TestServesTheE2ENginxImages(t *testing.T) {
	dir := moduleDir(t, "k8s.io/kubernetes@"+libSetting(t, "KUBE_VERSION"))
	b, err := os.ReadFile(filepath.Join(dir, "test/utils/image/manifest.go"))
	if err != nil {
		t.Fatal(err)
	}
	tags := regexp.MustCompile(`configs\[Nginx(?:New)?\] = Config\{list\.PromoterE2eRegistry, "nginx", "([^"]+)"\}`).FindAllSubmatch(b, -1)
	if len(tags) != 2 {
		t.Fatalf("found %d nginx images in the e2e manifest, want 2", len(tags))
	}
	for _, tag := range tags {
		if ref := "e2e-test-images/nginx:" + string(tag[1]); !servedRef(ref) {
			t.Errorf("the e2e suite runs %s, which the registry does not serve", ref)
		}
	}
}

func TestNginxImageRunsNginxAsTheOfficialImageDoes(t *testing.T) {
	bin := t.TempDir()
	// Any dynamically linked binary stands in for nginx: the image carries it with the libraries ldd lists.
	host, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip("no /bin/true")
	}
	if err := os.WriteFile(filepath.Join(bin, "nginx"), host, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "nginx-mime.types"), []byte("types {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := []entry{dir("bin", 0o755), dir("etc", 0o755), file("bin/busybox", 0o755, []byte("bb")),
		symlink("bin/sh", "busybox"), file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))}
	img, err := nginxImage(root, bin)
	if err != nil {
		t.Fatal(err)
	}
	files, cfg := layerFiles(t, img)
	if !slices.Equal(cfg.Cmd, []string{"nginx", "-g", "daemon off;"}) || cfg.StopSignal != "SIGQUIT" {
		t.Errorf("config runs %v stopped by %q, want nginx in the foreground stopped by SIGQUIT", cfg.Cmd, cfg.StopSignal)
	}
	for _, want := range []string{"usr/sbin/nginx", "etc/nginx/nginx.conf", "etc/nginx/conf.d/default.conf",
		"etc/nginx/mime.types", "usr/share/nginx/html/index.html", "var/lib/nginx", "bin/sh"} {
		if _, ok := files[want]; !ok {
			t.Errorf("the nginx image has no %s", want)
		}
	}
	if h := files["var/log/nginx/error.log"]; h.Linkname != "/dev/stderr" {
		t.Errorf("error.log links to %q, want /dev/stderr", h.Linkname)
	}
	if passwd := layerText(t, img, "etc/passwd"); !strings.Contains(passwd, "nginx:x:101:101:") {
		t.Errorf("/etc/passwd has no nginx user 101:\n%s", passwd)
	}
}

// layerText is the content of one file of an image's layer.
func layerText(t *testing.T, img *ociImage, name string) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(img.layer))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s is not in the layer: %v", name, err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
}
