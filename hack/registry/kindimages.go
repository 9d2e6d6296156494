package main

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The images a kubeadm cluster runs (`kubeadm config images list`), for kind node images: the control plane
// binaries on the distroless tree, as upstream builds them; kube-proxy on a Debian tree with iptables and
// conntrack (upstream: distroless-iptables); etcd and CoreDNS built from the module proxy.

// kindSources are where the cluster images come from; an empty field leaves its images out.
type kindSources struct {
	// kubeBin holds kube-apiserver, kube-controller-manager, kube-scheduler and kube-proxy, served with
	// kubeVersion as their tag.
	kubeBin, kubeVersion string
	// proxyBase is a tar of the Debian tree kube-proxy runs on.
	proxyBase string
	// etcd is the etcd server binary, served as etcd:<etcdTag>.
	etcd, etcdTag string
	// coredns is the CoreDNS binary, served as coredns/coredns:<corednsTag>.
	coredns, corednsTag string
	// flannel is flanneld, served as flannel/flannel:<flannelTag> on the proxyBase tree (it runs iptables).
	flannel, flannelTag string
}

// clusterImage is one cluster image: its binary, where it goes in the image, whether it goes on the Debian
// tree (else the distroless one), and the name it is served under.
type clusterImage struct {
	key, bin, at, ref string
	debian            bool
}

// clusterImages are the images kindSources names.
func (src kindSources) clusterImages() ([]clusterImage, error) {
	var out []clusterImage
	if src.kubeBin != "" {
		if src.kubeVersion == "" {
			return nil, errors.New("--kube-version is required with --kube-bin")
		}
		for _, b := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			out = append(out, clusterImage{key: b, bin: filepath.Join(src.kubeBin, b), at: "usr/local/bin/" + b, ref: b + ":" + src.kubeVersion})
		}
		if src.proxyBase != "" {
			out = append(out, clusterImage{key: "kube-proxy", bin: filepath.Join(src.kubeBin, "kube-proxy"),
				at: "usr/local/bin/kube-proxy", ref: "kube-proxy:" + src.kubeVersion, debian: true})
		}
	}
	if src.flannel != "" {
		if src.proxyBase == "" {
			return nil, errors.New("--flannel needs --kube-proxy-base, the tree it runs on")
		}
		out = append(out, clusterImage{key: "flannel", bin: src.flannel, at: "opt/bin/flanneld", ref: "flannel/flannel:" + src.flannelTag, debian: true})
	}
	if src.etcd != "" {
		out = append(out, clusterImage{key: "etcd", bin: src.etcd, at: "usr/local/bin/etcd", ref: "etcd:" + src.etcdTag})
	}
	if src.coredns != "" {
		out = append(out, clusterImage{key: "coredns", bin: src.coredns, at: "coredns", ref: "coredns/coredns:" + src.corednsTag})
	}
	return out, nil
}

// addKindImages builds the cluster images kindSources names.
func addKindImages(images map[string]*ociImage, src kindSources) error {
	list, err := src.clusterImages()
	if err != nil {
		return err
	}
	for _, c := range list {
		var img *ociImage
		if c.debian {
			img, err = debianToolImage(c.bin, c.at, src.proxyBase)
		} else {
			img, err = distrolessImage(c.bin, c.at)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c.key, err)
		}
		images[c.key] = img
		served[c.key] = []string{c.ref}
	}
	return nil
}

// debianToolImage is the binary at "at" on the tree of the base tar (a Debian tree with iptables and
// conntrack), run as the entrypoint.
func debianToolImage(bin, at, base string) (*ociImage, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	tree, err := tarTree(base)
	if err != nil {
		return nil, err
	}
	tree = remove(tree, at)
	tree = append(tree, parents(at)...)
	tree = append(tree, file(at, 0o755, b))
	cfg := v1.Config{Entrypoint: []string{"/" + at}, Env: []string{defaultPath}}
	return imageLevel(tree, cfg, gzip.BestSpeed)
}

// tarTree reads a root filesystem tar (names relative to its root, "./" or not) into entries: directories,
// files, symlinks and device nodes, with their modes.
func tarTree(path string) ([]entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var out []entry
	// Hard links become copies of their target: the layer's entries are written sorted by name, which can
	// put a link before the file it names.
	regular := map[string]entry{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")
		if name == "" || name == "." {
			continue
		}
		e := entry{hdr: tar.Header{Typeflag: h.Typeflag, Name: name, Linkname: h.Linkname, Mode: h.Mode & int64(fs.ModePerm|0o7000),
			Devmajor: h.Devmajor, Devminor: h.Devminor}}
		switch h.Typeflag {
		case tar.TypeReg:
			if e.data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
			e.hdr.Size = int64(len(e.data))
			regular[name] = e
		case tar.TypeLink:
			target, ok := regular[strings.TrimPrefix(strings.TrimPrefix(h.Linkname, "./"), "/")]
			if !ok {
				return nil, fmt.Errorf("%s: hard link %s to %s, not seen before it", path, name, h.Linkname)
			}
			e = file(name, target.hdr.Mode, target.data)
		case tar.TypeDir:
			e.hdr.Name = strings.TrimSuffix(name, "/") + "/"
		case tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		default:
			continue
		}
		out = append(out, e)
	}
}
