package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The upstream e2e test images the [NodeConformance] specs run, rebuilt from local parts: each is the busybox
// tree plus what the upstream image adds that the specs use. Their names are the ones e2e.test v1.37 pulls.
func init() {
	served["agnhost"] = []string{"e2e-test-images/agnhost:2.66.1", "e2e-test-images/agnhost:2.55"}
	served["nonroot"] = []string{"e2e-test-images/nonroot:1.5"}
	served["nonewprivs"] = []string{"e2e-test-images/nonewprivs:1.4"}
	served["glibc-dns-testing"] = []string{"e2e-test-images/glibc-dns-testing:2.1.1"}
	served["kitten"] = []string{"e2e-test-images/kitten:1.8"}
	served["nautilus"] = []string{"e2e-test-images/nautilus:1.8"}
	// 1.7 is the image manifest's name, 1.8.0 the one of the DaemonSet the DRA extended resource specs deploy.
	served["sample-device-plugin"] = []string{"e2e-test-images/sample-device-plugin:1.7", "e2e-test-images/sample-device-plugin:1.8.0"}
	served["sample-apiserver"] = []string{"e2e-test-images/sample-apiserver:1.29.2"}
}

// sampleAPIServerImage is the upstream sample-apiserver image (test/images/sample-apiserver): the busybox tree
// and /sample-apiserver, its entrypoint (k8s.io/sample-apiserver, built by build-testbins.sh sampleapiserver).
func sampleAPIServerImage(root []entry, bin string) (*ociImage, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	return image(merge(root, []entry{file("sample-apiserver", 0o755, b)}), v1.Config{Entrypoint: []string{"/sample-apiserver"}, Env: []string{defaultPath}})
}

// devicePluginImage is the upstream sample device plugin's image (test/images/sample-device-plugin): the
// busybox tree and /sampledeviceplugin, its entrypoint.
func devicePluginImage(root []entry, bin string) (*ociImage, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	files := merge(root, []entry{file("sampledeviceplugin", 0o755, b)})
	return image(files, v1.Config{Entrypoint: []string{"/sampledeviceplugin", "-alsologtostderr"}, Env: []string{defaultPath}})
}

// addE2EImages builds agnhost, nonroot, nonewprivs, glibc-dns-testing, kitten, nautilus, nginx and
// sample-apiserver on top of the busybox tree.
func addE2EImages(images map[string]*ociImage, root []entry, src sources) error {
	agnTree, err := agnhostTree(root, src)
	if err != nil {
		return fmt.Errorf("agnhost: %w", err)
	}
	// The private registry specs pull pause:testing from agnhost's fake-registry-server.
	agnTree = append(agnTree, fakeRegistryTree("pause", "testing", images["pause"])...)
	agn, err := image(agnTree, agnhostConfig("pause"))
	if err != nil {
		return fmt.Errorf("agnhost: %w", err)
	}
	// nonroot: the upstream image is busybox with USER 1234.
	nonroot, err := image(root, v1.Config{Cmd: []string{"sh"}, Env: []string{defaultPath}, User: "1234"})
	if err != nil {
		return fmt.Errorf("nonroot: %w", err)
	}
	nnp, err := os.ReadFile(filepath.Join(src.e2eBin, "nnp"))
	if err != nil {
		return fmt.Errorf("nonewprivs: %w", err)
	}
	// nonewprivs: nnp prints its effective UID; it is setuid root, so it shows whether privileges can escalate.
	nnpFiles := merge(root, []entry{dir("usr/local", 0o755), dir("usr/local/bin", 0o755),
		file("usr/local/bin/nnp", 0o4755, nnp)})
	nonewprivs, err := image(nnpFiles, v1.Config{Cmd: []string{"nnp"}, Env: []string{defaultPath}})
	if err != nil {
		return fmt.Errorf("nonewprivs: %w", err)
	}
	dns, err := glibcDNSImage(root)
	if err != nil {
		return fmt.Errorf("glibc-dns-testing: %w", err)
	}
	images["agnhost"], images["nonroot"], images["nonewprivs"] = agn, nonroot, nonewprivs
	images["glibc-dns-testing"] = dns
	if src.agnhostSrc != "" {
		for _, name := range []string{"kitten", "nautilus"} {
			img, err := webImage(agnTree, src, name)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			images[name] = img
		}
	}
	// The Aggregator spec's API server, when built (build-testbins.sh sampleapiserver).
	if bin := filepath.Join(src.e2eBin, "sample-apiserver"); fileExists(bin) {
		img, err := sampleAPIServerImage(root, bin)
		if err != nil {
			return fmt.Errorf("sample-apiserver: %w", err)
		}
		images["sample-apiserver"] = img
	}
	// nginx comes from the distribution (build-testbins.sh e2e fetches it); a folder without it serves the rest.
	if _, err := os.Stat(filepath.Join(src.e2eBin, "nginx")); err == nil {
		nginx, err := nginxImage(root, src.e2eBin)
		if err != nil {
			return err
		}
		images["nginx"] = nginx
	}
	return nil
}

// webImage is the upstream kitten or nautilus image (test/images/<name>): agnhost with the picture and
// data.json of the image's html folder at / and test-webserver as its command. The upstream base is agnhost on
// Alpine Linux, which the image volume specs look for in /etc/os-release: the file says what this tree is.
func webImage(agnTree []entry, src sources, name string) (*ociImage, error) {
	html := filepath.Join(src.agnhostSrc, "..", name, "html")
	var files []entry
	for _, f := range []string{name + ".jpg", "data.json"} {
		b, err := os.ReadFile(filepath.Join(html, f))
		if err != nil {
			return nil, err
		}
		files = append(files, file(f, 0o644, b))
	}
	files = append(files, file("etc/os-release", 0o644, []byte(
		"NAME=\"nodelet test bed\"\nID=nodelet-bed\n"+
			"PRETTY_NAME=\"busybox tree standing in for the upstream "+name+" image (agnhost on Alpine Linux)\"\n")))
	return image(merge(agnTree, files), agnhostConfig("test-webserver"))
}

// hostsFilesThenDNS is the nsswitch.conf of the images that carry glibc tools: /etc/hosts, then DNS (glibc's
// default without the file asks DNS alone whenever it answers).
const hostsFilesThenDNS = "hosts: files dns\nnetworks: files\n"

// glibcDNSImage: the upstream image is Debian with glibc's resolver; the specs run `hostname -f` in it, which
// resolves the pod's own name through /etc/hosts with glibc's NSS, and the DNS specs query with dig and look
// /etc/hosts entries up with getent in it. The host's (glibc) hostname, dig and getent with their libraries
// and an nsswitch.conf give that on the busybox tree.
func glibcDNSImage(root []entry) (*ociImage, error) {
	var files []entry
	for _, b := range []string{"usr/bin/hostname", "usr/bin/dig", "usr/bin/getent"} {
		bin, err := hostBinary("/"+b, b)
		if err != nil {
			return nil, err
		}
		files = append(files, bin...)
	}
	files = append(files, file("etc/nsswitch.conf", 0o644, []byte(hostsFilesThenDNS)))
	return image(merge(root, files), v1.Config{Cmd: []string{"sh"}, Env: []string{defaultPath}})
}

// fakeRegistryTree is what agnhost's fake-registry-server serves from /var/registry (upstream's image
// prepares it with fakeregistryserver/prepare_registry.sh, which copies registry.k8s.io's pause as
// pause:testing): the image's manifest and blobs under their digests, and the tag's file naming the manifest.
func fakeRegistryTree(name, tag string, img *ociImage) []entry {
	if img == nil {
		return nil
	}
	base := "var/registry/" + name
	var files []entry
	add := func(dir string, data []byte) {
		d := sha(data)
		p := path.Join(base, dir, d.Algorithm, d.Hex[:2], d.Hex, "data")
		files = append(files, parents(p)...)
		files = append(files, file(p, 0o644, data))
	}
	add("manifests", img.manifest)
	add("blobs", img.config)
	add("blobs", img.layer)
	return append(files, file(path.Join(base, "manifests", tag), 0o644, []byte(img.digest.String()+"\n")))
}

// agnhostConfig runs /agnhost with the subcommand cmd unless the pod says otherwise.
func agnhostConfig(cmd string) v1.Config {
	return v1.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{cmd}, Env: []string{defaultPath}}
}

// agnhostTree is the agnhost image's files: /agnhost (and /agnhost-2) on the busybox tree with the tools the
// specs call inside it — bash, curl, (OpenBSD) nc, and dig and getent (the DNS specs' queries and /etc/hosts
// look-ups) from the host with their libraries, and an nsswitch.conf that reads /etc/hosts before DNS, as
// Alpine's musl does — the user and group the upstream image defines, /uploads and porter's TLS pair.
func agnhostTree(root []entry, src sources) ([]entry, error) {
	bin, err := os.ReadFile(filepath.Join(src.e2eBin, "agnhost"))
	if err != nil {
		return nil, err
	}
	files := []entry{
		file("agnhost", 0o755, bin), symlink("agnhost-2", "agnhost"), dir("uploads", 0o755),
		dir("home/user-defined-in-image", 0o755),
		file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"+
			"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n")),
		file("etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\nuser-defined-in-image:x:1000:\n"+
			"group-defined-in-image:x:50000:user-defined-in-image\n")),
		file("etc/nsswitch.conf", 0o644, []byte(hostsFilesThenDNS)),
	}
	tools := []struct{ host, name string }{
		{"/usr/bin/bash", "bin/bash"}, {"/usr/bin/curl", "usr/bin/curl"}, {"/bin/nc.openbsd", "usr/bin/nc"},
		{"/usr/bin/dig", "usr/bin/dig"}, {"/usr/bin/getent", "usr/bin/getent"},
	}
	for _, t := range tools {
		tool, err := hostBinary(t.host, t.name)
		if err != nil {
			return nil, err
		}
		files = append(files, tool...)
	}
	for _, name := range []string{"localhost.crt", "localhost.key"} {
		if src.agnhostSrc == "" {
			break
		}
		b, err := os.ReadFile(filepath.Join(src.agnhostSrc, "porter", name))
		if err != nil {
			return nil, err
		}
		files = append(files, file(name, 0o644, b))
	}
	// busybox's nc applet would shadow the OpenBSD one in /bin.
	return remove(merge(root, files), "bin/nc"), nil
}

// hostBinary is a dynamically linked host binary placed at name in the image, with every library ldd lists at
// its host path (and the folders on the way), so it runs in a tree of its own.
func hostBinary(hostPath, name string) ([]entry, error) {
	bin, err := os.ReadFile(hostPath)
	if err != nil {
		return nil, err
	}
	out, err := exec.Command("ldd", hostPath).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", hostPath, err)
	}
	files := append(parents(name), file(name, 0o755, bin))
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		lib := libPath(sc.Text())
		if lib == "" {
			continue
		}
		b, err := os.ReadFile(lib) // follows the symlink: the image gets the file under the linked name
		if err != nil {
			return nil, err
		}
		rel := strings.TrimPrefix(lib, "/")
		files = append(files, parents(rel)...)
		files = append(files, file(rel, 0o755, b))
	}
	return files, nil
}

// libPath is the library file of one ldd output line ("libc.so.6 => /lib/.../libc.so.6 (0x...)" or
// "/lib64/ld-linux-x86-64.so.2 (0x...)"), empty for the vDSO and anything else.
func libPath(line string) string {
	f := strings.Fields(line)
	switch {
	case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
		return f[2]
	case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
		return f[0]
	}
	return ""
}

// parents are directory entries for every folder above name.
func parents(name string) []entry {
	var dirs []entry
	for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
		dirs = append(dirs, dir(d, 0o755))
	}
	return dirs
}

// merge is base with over's entries added; an entry of over replaces base's entry of the same name.
func merge(base, over []entry) []entry {
	names := map[string]int{}
	out := make([]entry, 0, len(base)+len(over))
	for _, e := range append(append([]entry{}, base...), over...) {
		key := strings.TrimSuffix(e.hdr.Name, "/")
		if i, ok := names[key]; ok {
			out[i] = e
			continue
		}
		names[key] = len(out)
		out = append(out, e)
	}
	return out
}

// remove drops the entry called name.
func remove(files []entry, name string) []entry {
	out := files[:0:0]
	for _, e := range files {
		if strings.TrimSuffix(e.hdr.Name, "/") != name {
			out = append(out, e)
		}
	}
	return out
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
