package main

import (
	"slices"
	"testing"
)

// The cluster images are served under the names kubeadm, kind's storage and the pod network pull.
func TestClusterImagesAreKubeadmsNames(t *testing.T) {
	src := kindSources{kubeBin: "/bin", kubeVersion: "v1.37.1", proxyBase: "/rootfs.tar", etcd: "/etcd", etcdTag: "3.7.0-0",
		coredns: "/coredns", corednsTag: "v1.14.6", flannel: "/flanneld", flannelTag: "v0.28.10"}
	list, err := src.clusterImages()
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, c := range list {
		refs = append(refs, c.ref)
	}
	want := []string{"kube-apiserver:v1.37.1", "kube-controller-manager:v1.37.1", "kube-scheduler:v1.37.1",
		"kube-proxy:v1.37.1", "flannel/flannel:v0.28.10", "etcd:3.7.0-0", "coredns/coredns:v1.14.6"}
	if !slices.Equal(refs, want) {
		t.Fatalf("refs %v, want %v", refs, want)
	}
	if _, err := (kindSources{kubeBin: "/bin"}).clusterImages(); err == nil {
		t.Error("--kube-bin without --kube-version accepted")
	}
	if _, err := (kindSources{flannel: "/flanneld"}).clusterImages(); err == nil {
		t.Error("--flannel without --kube-proxy-base accepted")
	}
}
