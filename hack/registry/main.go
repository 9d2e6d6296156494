// Command registry is the test bed's loopback OCI registry (go-containerregistry's pkg/registry). At start it
// builds the bed's images from local files — busybox (Debian's static busybox plus one symlink per applet),
// pause (our hack/pause binary), and when their binaries are built the e2e test images (e2eimages.go) and the
// storage images (csiimages.go) — and pushes them in process into the in-memory registry, then serves it. Every
// tar is written reproducibly (sorted entries, mtime 0, uid/gid 0), so the digests are the same on every start.
// Pushes from clients are accepted too (kept in memory until the process ends).
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// epoch is the timestamp of every tar entry and of the image configs, so digests never change.
var epoch = time.Unix(0, 0).UTC()

// served lists, per image, the repository:tag names it is pushed under.
var served = map[string][]string{
	"busybox": {
		"library/busybox:latest", "library/busybox:1.37", "library/busybox:1.37.0",
		"e2e-test-images/busybox:1.37.0-2",
	},
	"pause": {"pause:3.10", "pause:3.10.1", "pause:3.10.2", "pause:3.6", "library/pause:3.10"},
}

func main() {
	addr := flag.String("addr", "127.0.0.1:5050", "listen address")
	var src sources
	flag.StringVar(&src.busybox, "busybox", "/bin/busybox", "path of a static busybox binary")
	flag.StringVar(&src.pause, "pause", "", "path of the static pause binary (hack/pause)")
	flag.StringVar(&src.e2eBin, "e2e-bin", "", "folder holding agnhost and nnp (and nginx with nginx-mime.types): also serve the upstream e2e test images")
	flag.StringVar(&src.agnhostSrc, "agnhost-src", "", "agnhost's source folder (for porter's localhost.crt/key)")
	flag.StringVar(&src.csiBin, "csi-bin", "", "folder of the CSI and local-path binaries: also serve the storage images")
	flag.StringVar(&src.devicePlugin, "device-plugin", "", "the upstream sample device plugin's binary: also serve its image")
	flag.StringVar(&src.kind.kubeBin, "kube-bin", "", "folder of kube-apiserver, kube-controller-manager, kube-scheduler and kube-proxy: also serve their images")
	flag.StringVar(&src.kind.kubeVersion, "kube-version", "", "the tag of the --kube-bin images")
	flag.StringVar(&src.kind.proxyBase, "kube-proxy-base", "", "tar of the Debian tree (with iptables and conntrack) kube-proxy's image is made on")
	flag.StringVar(&src.kind.etcd, "etcd", "", "the etcd server binary: also serve its image")
	flag.StringVar(&src.kind.etcdTag, "etcd-tag", "", "the tag of the etcd image")
	flag.StringVar(&src.kind.coredns, "coredns", "", "the CoreDNS binary: also serve its image")
	flag.StringVar(&src.kind.corednsTag, "coredns-tag", "", "the tag of the CoreDNS image")
	flag.StringVar(&src.kind.flannel, "flannel", "", "flanneld: also serve its image (on the --kube-proxy-base tree)")
	flag.StringVar(&src.kind.flannelTag, "flannel-tag", "", "the tag of the flannel image")
	flag.StringVar(&src.conformance.bin, "conformance-bin", "", "folder of e2e.test, ginkgo and go-runner: also serve the conformance image (needs --kubectl, --kube-version, --kube-proxy-base)")
	flag.StringVar(&src.conformance.kubectl, "kubectl", "", "the kubectl binary of the conformance image")
	quiet := flag.Bool("quiet", false, "do not log every request")
	flag.Parse()
	src.conformance.tag = src.kind.kubeVersion
	if err := run(*addr, src, *quiet); err != nil {
		log.Fatalf("registry: %v", err)
	}
}

// sources are the local files the images are built from.
type sources struct {
	busybox, pause     string
	e2eBin, agnhostSrc string
	csiBin             string
	devicePlugin       string
	kind               kindSources
	conformance        conformanceSources
}

func run(addr string, src sources, quiet bool) error {
	if src.pause == "" {
		return errors.New("--pause is required")
	}
	var opts []registry.Option
	if quiet {
		opts = append(opts, registry.Logger(log.New(io.Discard, "", 0)))
	}
	handler := registry.New(opts...)
	images, err := buildImages(src)
	if err != nil {
		return err
	}
	if err := pushAll(handler, images); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	log.Printf("serving on http://%s", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Printf("stopped")
	return nil
}

func buildImages(src sources) (map[string]*ociImage, error) {
	root, err := busyboxRoot(src.busybox)
	if err != nil {
		return nil, fmt.Errorf("busybox image: %w", err)
	}
	bb, err := image(root, v1.Config{Cmd: []string{"sh"}, Env: []string{defaultPath}})
	if err != nil {
		return nil, fmt.Errorf("busybox image: %w", err)
	}
	p, err := pauseImage(src.pause)
	if err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	images := map[string]*ociImage{"busybox": bb, "pause": p}
	if src.e2eBin != "" {
		if err := addE2EImages(images, root, src); err != nil {
			return nil, fmt.Errorf("e2e test images: %w", err)
		}
	}
	if src.csiBin != "" {
		if err := addCSIImages(images, root, src.csiBin); err != nil {
			return nil, fmt.Errorf("storage images: %w", err)
		}
	}
	if src.devicePlugin != "" {
		img, err := devicePluginImage(root, src.devicePlugin)
		if err != nil {
			return nil, fmt.Errorf("sample device plugin image: %w", err)
		}
		images["sample-device-plugin"] = img
	}
	if err := addKindImages(images, src.kind); err != nil {
		return nil, fmt.Errorf("cluster images: %w", err)
	}
	if err := addConformanceImage(images, src.conformance, src.kind.proxyBase); err != nil {
		return nil, err
	}
	return images, nil
}

// pushAll pushes every image under all its names straight into the handler (no socket involved), so the
// registry is complete before it starts listening.
func pushAll(h http.Handler, images map[string]*ociImage) error {
	keys := make([]string, 0, len(images))
	for k := range images {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		img := images[k]
		for _, ref := range served[k] {
			repo, tag, _ := strings.Cut(ref, ":")
			if err := img.push(h, repo, tag); err != nil {
				return fmt.Errorf("push %s: %w", ref, err)
			}
			log.Printf("image %s %s", ref, img.digest)
		}
	}
	return nil
}

// ociImage is a one-layer OCI image held in memory: its blobs and its manifest.
type ociImage struct {
	layer, config, manifest []byte
	digest                  v1.Hash
}

func (img *ociImage) push(h http.Handler, repo, tag string) error {
	for _, blob := range [][]byte{img.layer, img.config} {
		url := fmt.Sprintf("/v2/%s/blobs/uploads/?digest=%s", repo, sha(blob))
		if err := serve(h, http.MethodPost, url, "application/octet-stream", blob); err != nil {
			return err
		}
	}
	url := fmt.Sprintf("/v2/%s/manifests/%s", repo, tag)
	return serve(h, http.MethodPut, url, string(types.OCIManifestSchema1), img.manifest)
}

// serve runs one request through the in-process registry handler and checks that it succeeded.
func serve(h http.Handler, method, url, contentType string, body []byte) error {
	req := httptest.NewRequest(method, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, url, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	return nil
}

func sha(b []byte) v1.Hash {
	s := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(s[:])}
}

// busyboxRoot is the busybox image's file tree: a static busybox with a symlink per applet. The bed gives it
// a busybox built from upstream's source (hack/build-testbins.sh busybox), whose ash passes environment variables
// with names that are not shell identifiers (e.g. "data-1") on to commands, as the upstream e2e busybox image does;
// Debian's busybox-static drops them.
func busyboxRoot(path string) ([]entry, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	applets, err := appletList(path)
	if err != nil {
		return nil, err
	}
	files := []entry{
		dir("bin", 0o755), dir("etc", 0o755), dir("root", 0o700), dir("tmp", 0o1777),
		dir("usr", 0o755), dir("var", 0o755), dir("home", 0o755),
		file("bin/busybox", 0o755, bin),
		file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n")),
		file("etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\n")),
	}
	for _, a := range applets {
		files = append(files, symlink("bin/"+a, "busybox"))
	}
	return files, nil
}

// appletList asks the busybox binary for its applets, skipping "busybox" itself and any nested path.
func appletList(path string) ([]string, error) {
	out, err := exec.Command(path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", path, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			applets = append(applets, a)
		}
	}
	if len(applets) == 0 {
		return nil, fmt.Errorf("%s --list printed no applets", path)
	}
	return applets, nil
}

func pauseImage(path string) (*ociImage, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return image([]entry{file("pause", 0o755, bin)}, v1.Config{Entrypoint: []string{"/pause"}, Env: []string{defaultPath}})
}

// image makes a one-layer OCI image from files with the given runtime config.
func image(files []entry, cfg v1.Config) (*ociImage, error) {
	return imageLevel(files, cfg, gzip.DefaultCompression)
}

// imageLevel is image with its layer compressed at the given gzip level (BestSpeed for the large ones, so the
// registry starts quickly).
func imageLevel(files []entry, cfg v1.Config, level int) (*ociImage, error) {
	layerTar, err := reproducibleTar(files)
	if err != nil {
		return nil, err
	}
	layerGz, err := gzipped(layerTar, level)
	if err != nil {
		return nil, err
	}
	config, err := json.Marshal(v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config:       cfg,
		RootFS:       v1.RootFS{Type: "layers", DiffIDs: []v1.Hash{sha(layerTar)}},
		History:      []v1.History{{Created: v1.Time{Time: epoch}, CreatedBy: "nodelet hack/registry"}},
	})
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal(v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: types.OCIConfigJSON, Size: int64(len(config)), Digest: sha(config)},
		Layers:        []v1.Descriptor{{MediaType: types.OCILayer, Size: int64(len(layerGz)), Digest: sha(layerGz)}},
	})
	if err != nil {
		return nil, err
	}
	return &ociImage{layer: layerGz, config: config, manifest: manifest, digest: sha(manifest)}, nil
}

// gzipped compresses b with no name and no timestamp in the header, so the output depends on b alone.
func gzipped(b []byte, level int) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, level)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type entry struct {
	hdr  tar.Header
	data []byte
}

func dir(name string, mode int64) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode}}
}

func file(name string, mode int64, data []byte) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}, data: data}
}

func symlink(name, target string) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}}
}

// reproducibleTar writes the entries sorted by name, owned by 0:0, with every timestamp at the epoch.
func reproducibleTar(files []entry) ([]byte, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].hdr.Name < files[j].hdr.Name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := f.hdr
		h.ModTime, h.Uid, h.Gid, h.Format = epoch, 0, 0, tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
