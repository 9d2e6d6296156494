package main

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path"
	"path/filepath"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The storage images: the CSI hostpath driver and the sidecars the upstream e2e manifests
// (test/e2e/testing-manifests/storage-csi/{hostpath,mock}) name, the snapshot controller, and the local-path
// provisioner with its helper under the names kind's default storage uses. Each binary comes from
// hack/build-testbins.sh csi; an image whose binary is missing is left out.

// csiImage is one storage image: the binary, where it goes in the image, and the names it is served under.
type csiImage struct {
	bin, at string
	refs    []string
}

// distrolessImages are the images upstream builds FROM gcr.io/distroless/static: the binary alone on a minimal
// tree, run as its entrypoint.
var distrolessImages = []csiImage{
	{bin: "csi-node-driver-registrar", refs: []string{"sig-storage/csi-node-driver-registrar:v2.17.0"}},
	{bin: "livenessprobe", refs: []string{"sig-storage/livenessprobe:v2.19.0"}},
	{bin: "csi-external-health-monitor-controller", refs: []string{"sig-storage/csi-external-health-monitor-controller:v0.18.0"}},
	{bin: "csi-provisioner", refs: []string{"sig-storage/csi-provisioner:v6.3.0"}},
	{bin: "csi-attacher", refs: []string{"sig-storage/csi-attacher:v4.12.0"}},
	{bin: "csi-resizer", refs: []string{"sig-storage/csi-resizer:v2.2.0"}},
	{bin: "csi-snapshotter", refs: []string{"sig-storage/csi-snapshotter:v8.6.0"}},
	{bin: "snapshot-controller", refs: []string{"sig-storage/snapshot-controller:v8.6.0"}},
	{bin: "csi-snapshot-metadata", refs: []string{"sig-storage/csi-snapshot-metadata:v1.0.0"}},
	{bin: "local-path-provisioner", at: "usr/local/bin/local-path-provisioner",
		refs: []string{"kindest/local-path-provisioner:v20260820-69b56db7"}},
}

// hostpathImage is the CSI hostpath driver (also the e2e suite's CSI mock driver).
var hostpathImage = csiImage{bin: "hostpathplugin", refs: []string{"sig-storage/hostpathplugin:v1.17.1"}}

// hostpathTools are the host programs hostpathplugin and its manifests run inside the image (upstream: alpine
// with util-linux, coreutils, socat and tar): mount and umount (bind mounts, by k8s.io/mount-utils), findmnt
// (its health check), losetup and blockdev (block volumes on loop devices), fallocate (block volume files), cp
// and dd (block snapshots and clones), tar and gzip (filesystem snapshots and clones), du, and socat (the
// csi-hostpath-socat pod of csi-hostpath-testing.yaml).
var hostpathTools = []string{
	"/usr/bin/mount", "/usr/bin/umount", "/usr/bin/findmnt", "/usr/sbin/losetup", "/usr/sbin/blockdev",
	"/usr/sbin/blkid", "/usr/bin/fallocate", "/usr/bin/cp", "/usr/bin/dd", "/usr/bin/du", "/usr/bin/tar",
	"/usr/bin/gzip", "/usr/bin/socat",
}

func init() {
	// The e2e suite's CSI mock proxy runs this busybox.
	served["busybox"] = append(served["busybox"], "e2e-test-images/busybox:1.36.1-1")
	// kind's local-path helper pod runs sh, mkdir and rm.
	served["local-path-helper"] = []string{"kindest/local-path-helper:v20260131-7181c60a"}
	for _, img := range append([]csiImage{hostpathImage}, distrolessImages...) {
		served[img.bin] = img.refs
	}
}

// addCSIImages builds the storage images whose binaries are in csiBin, side by side (their layers are large).
func addCSIImages(images map[string]*ociImage, root []entry, csiBin string) error {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	add := func(key string, build func() (*ociImage, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			img, err := build()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", key, err))
				return
			}
			images[key] = img
		}()
	}
	add("local-path-helper", func() (*ociImage, error) {
		return image(root, v1.Config{Cmd: []string{"sh"}, Env: []string{defaultPath}})
	})
	for _, c := range append([]csiImage{hostpathImage}, distrolessImages...) {
		bin := filepath.Join(csiBin, c.bin)
		if _, err := os.Stat(bin); errors.Is(err, fs.ErrNotExist) {
			log.Printf("image %s left out: %s is not built (hack/build-testbins.sh csi)", c.bin, bin)
			continue
		}
		if c.bin == hostpathImage.bin {
			add(c.bin, func() (*ociImage, error) { return hostpathPluginImage(root, bin) })
			continue
		}
		add(c.bin, func() (*ociImage, error) { return distrolessImage(bin, c.at) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// distrolessTree is what the sidecars find of gcr.io/distroless/static: the users root, nobody and nonroot,
// /tmp, the CA bundle.
func distrolessTree() []entry {
	files := []entry{
		dir("etc", 0o755), dir("home", 0o755), dir("home/nonroot", 0o700), dir("root", 0o700),
		dir("tmp", 0o1777), dir("var", 0o755),
		file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\n"+
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")),
		file("etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")),
		file("etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n")),
	}
	if ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		files = append(files, parents("etc/ssl/certs/ca-certificates.crt")...)
		files = append(files, file("etc/ssl/certs/ca-certificates.crt", 0o644, ca))
	}
	return files
}

// distrolessImage is one binary at /NAME (or at) on the distroless tree, run as the entrypoint.
func distrolessImage(bin, at string) (*ociImage, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	if at == "" {
		at = filepath.Base(bin)
	}
	files := append(distrolessTree(), parents(at)...)
	files = append(files, file(at, 0o755, b))
	cfg := v1.Config{Entrypoint: []string{"/" + at}, Env: []string{defaultPath}}
	return imageLevel(files, cfg, gzip.BestSpeed)
}

// hostpathPluginImage is /hostpathplugin on the busybox tree with hostpathTools from the host (each shadows
// busybox's applet of the same name) and /etc/mtab as on alpine.
func hostpathPluginImage(root []entry, bin string) (*ociImage, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	files := []entry{file("hostpathplugin", 0o755, b), symlink("etc/mtab", "../proc/self/mounts")}
	tree := root
	for _, t := range hostpathTools {
		tool, err := hostBinary(t, t[1:])
		if err != nil {
			return nil, err
		}
		files = append(files, tool...)
		tree = remove(tree, "bin/"+path.Base(t))
	}
	cfg := v1.Config{Entrypoint: []string{"/hostpathplugin"}, Env: []string{defaultPath}}
	return imageLevel(merge(tree, files), cfg, gzip.BestSpeed)
}
