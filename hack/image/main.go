// Command image builds the nodelet container image without a Docker engine, with go-containerregistry:
// a scratch image holding the static nodelet binary and the build host's CA certificates, entrypoint
// /usr/local/bin/nodelet (as the Dockerfile's). One binary per architecture (-bin linux/amd64=bin/nodelet,...):
// one architecture is written as a tarball (-tar) that `skopeo copy docker-archive:...` or `crane push`
// take; several make an image index, written as an OCI image layout (-oci). -push REF pushes the image
// (or the index) to a registry (plain HTTP for localhost and 127.0.0.1).
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	binaryPath = "usr/local/bin/nodelet"
	caPath     = "etc/ssl/certs/ca-certificates.crt"
)

type options struct {
	bins       map[string]string // platform "os/arch" → binary
	ca         string
	tag        string
	tarPath    string
	ociPath    string
	push       string
	version    string
	digestFile string
	pin        string
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	o := options{bins: map[string]string{}}
	var bins string
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&bins, "bin", "linux/amd64=bin/nodelet", "comma-separated os/arch=path of the static nodelet binaries")
	fs.StringVar(&o.ca, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle put into the image")
	fs.StringVar(&o.tag, "tag", "nodelet:dev", "the image's name in the tarball")
	fs.StringVar(&o.tarPath, "tar", "", "write the image (one architecture) as a tarball here")
	fs.StringVar(&o.ociPath, "oci", "", "write the image or index as an OCI image layout here")
	fs.StringVar(&o.push, "push", "", "push to this reference, e.g. 127.0.0.1:5050/nodelet:dev")
	fs.StringVar(&o.version, "version", "dev", "the org.opencontainers.image.version label")
	fs.StringVar(&o.digestFile, "digest-file", "", "also write the image's (or index's) digest to this file")
	fs.StringVar(&o.pin, "pin", "", "with -push: pin the kustomization file's nodelet image to the pushed repository and digest")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, b := range strings.Split(bins, ",") {
		platform, path, ok := strings.Cut(b, "=")
		if !ok || !strings.Contains(platform, "/") {
			return o, fmt.Errorf("-bin %q: want os/arch=path", b)
		}
		o.bins[platform] = path
	}
	if o.tarPath == "" && o.ociPath == "" && o.push == "" {
		return o, errors.New("nothing to do: give -tar, -oci or -push")
	}
	if o.pin != "" && o.push == "" {
		return o, errors.New("-pin needs -push: a digest is pinned to the repository it was pushed to")
	}
	if o.tarPath != "" && len(o.bins) > 1 {
		return o, errors.New("-tar holds one architecture: use -oci or -push for several")
	}
	return o, nil
}

func run(o options) error {
	ca, err := os.ReadFile(o.ca)
	if err != nil {
		return fmt.Errorf("CA certificates: %w", err)
	}
	var images []v1.Image
	var platforms []v1.Platform
	for platform, bin := range o.bins {
		osName, arch, _ := strings.Cut(platform, "/")
		p := v1.Platform{OS: osName, Architecture: arch}
		img, err := build(bin, ca, p, o.version)
		if err != nil {
			return err
		}
		images, platforms = append(images, img), append(platforms, p)
	}
	if o.tarPath != "" {
		ref, err := name.ParseReference(o.tag)
		if err != nil {
			return err
		}
		if err := tarball.WriteToFile(o.tarPath, ref, images[0]); err != nil {
			return err
		}
		fmt.Println("wrote", o.tarPath, o.tag)
	}
	idx := index(images, platforms)
	digest, err := report(images, idx, o.digestFile)
	if err != nil {
		return err
	}
	if o.ociPath != "" {
		if err := writeLayout(o.ociPath, images, idx); err != nil {
			return err
		}
		fmt.Println("wrote OCI layout", o.ociPath)
	}
	if o.push == "" {
		return nil
	}
	repo, err := push(o.push, images, idx)
	if err != nil || o.pin == "" {
		return err
	}
	if err := pin(o.pin, repo, digest); err != nil {
		return fmt.Errorf("pin %s: %w", o.pin, err)
	}
	fmt.Println("pinned", o.pin, "to", repo+"@"+digest)
	return nil
}

// report prints the digest of what was built, and writes it to file unless that is "". The digest is what a
// deployment pins (deploy/kustomization.yaml): the build is reproducible, so the same binaries give the same
// digest in the tarball, the OCI layout and the registry.
func report(images []v1.Image, idx v1.ImageIndex, file string) (string, error) {
	digest, err := digestOf(images, idx)
	if err != nil {
		return "", err
	}
	fmt.Println("digest", digest)
	if file != "" {
		err = os.WriteFile(file, []byte(digest+"\n"), 0o644) //nolint:gosec // a digest, not a secret
	}
	return digest, err
}

// digestOf is the digest a registry serves for what push writes: the image's manifest, or the index's.
func digestOf(images []v1.Image, idx v1.ImageIndex) (string, error) {
	var (
		h   v1.Hash
		err error
	)
	if len(images) == 1 {
		h, err = images[0].Digest()
	} else {
		h, err = idx.Digest()
	}
	return h.String(), err
}

// build is the image for one platform: a single layer with the binary and the CA bundle.
func build(bin string, ca []byte, p v1.Platform, version string) (v1.Image, error) {
	binary, err := os.ReadFile(bin) //nolint:gosec // the build's own binary
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar(binary, ca))), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = p.OS, p.Architecture, v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config.Entrypoint = []string{"/" + binaryPath}
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/" + caPath}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "nodelet",
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://github.com/nodelet/nodelet",
	}
	return mutate.ConfigFile(img, cfg)
}

// layerTar is the layer's tar: the directories, the binary (0755) and the CA bundle, owned by root, at
// a fixed time so that the same inputs give the same digest.
func layerTar(binary, ca []byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, d := range []string{"etc/", "etc/ssl/", "etc/ssl/certs/", "usr/", "usr/local/", "usr/local/bin/", "tmp/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode, ModTime: epoch})
	}
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{binaryPath, 0o755, binary}, {caPath, 0o644, ca}} {
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch})
		_, _ = tw.Write(f.data)
	}
	_ = tw.Close()
	return buf.Bytes()
}

// index is the multi-architecture index of the images.
func index(images []v1.Image, platforms []v1.Platform) v1.ImageIndex {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, img := range images {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platforms[i]}})
	}
	return idx
}

func writeLayout(path string, images []v1.Image, idx v1.ImageIndex) error {
	if len(images) == 1 {
		p, err := layout.Write(path, empty.Index)
		if err != nil {
			return err
		}
		return p.AppendImage(images[0])
	}
	_, err := layout.Write(path, idx)
	return err
}

// push writes the image (or the index) to ref and returns ref's repository.
func push(ref string, images []v1.Image, idx v1.ImageIndex) (string, error) {
	var opts []name.Option
	if strings.HasPrefix(ref, "localhost") || strings.HasPrefix(ref, "127.0.0.1") {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return "", err
	}
	if len(images) == 1 {
		err = remote.Write(r, images[0])
	} else {
		err = remote.WriteIndex(r, idx)
	}
	if err != nil {
		return "", err
	}
	fmt.Println("pushed", r.String())
	return r.Context().Name(), nil
}

// pin rewrites the kustomization file's `images` entry named nodelet to newName repo and digest (in place of
// a tag), keeping the rest of the file as it is.
func pin(path, repo, digest string) error {
	data, err := os.ReadFile(path) //nolint:gosec // the build's own file
	if err != nil {
		return err
	}
	out, err := pinImage(string(data), repo, digest)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(out), 0o644) //nolint:gosec // a kustomization, read by everyone
}

// pinImage is pin on the file's text: the lines of the `- name: nodelet` entry after its name become
// newName and digest.
func pinImage(text, repo, digest string) (string, error) {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "- name: nodelet" {
			continue
		}
		indent := l[:strings.Index(l, "-")] + "  "
		end := i + 1
		for end < len(lines) && strings.HasPrefix(lines[end], indent) {
			end++
		}
		entry := []string{indent + "newName: " + repo + "\n", indent + "digest: " + digest + "\n"}
		return strings.Join(slices.Concat(lines[:i+1], entry, lines[end:]), ""), nil
	}
	return "", errors.New("no images entry named nodelet")
}
