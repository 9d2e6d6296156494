package main

import (
	"path"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The tree agnhost's fake-registry-server serves: the tag's file names the manifest's digest, and the
// manifest and blobs are at the digest paths the server reads (<dir>/<algo>/<2 hex>/<hex>/data).
func TestFakeRegistryTreeIsWhatTheServerReads(t *testing.T) {
	img, err := image([]entry{file("pause", 0o755, []byte("binary"))}, v1.Config{Entrypoint: []string{"/pause"}})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range fakeRegistryTree("pause", "testing", img) {
		files[e.hdr.Name] = e.data
	}
	if got := strings.TrimSpace(string(files["var/registry/pause/manifests/testing"])); got != img.digest.String() {
		t.Fatalf("tag file = %q, want %s", got, img.digest)
	}
	at := func(dir string, b []byte) string {
		d := sha(b)
		return path.Join("var/registry/pause", dir, d.Algorithm, d.Hex[:2], d.Hex, "data")
	}
	for p, want := range map[string][]byte{
		at("manifests", img.manifest): img.manifest, at("blobs", img.config): img.config, at("blobs", img.layer): img.layer,
	} {
		if string(files[p]) != string(want) {
			t.Errorf("%s: %d bytes, want %d", p, len(files[p]), len(want))
		}
	}
}
