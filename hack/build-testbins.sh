#!/usr/bin/env bash
# Builds the test bed's Kubernetes and etcd binaries from the Go module proxy into a cache folder keyed by
# version: kube-apiserver, kubectl, kube-scheduler, kube-controller-manager (k8s.io/kubernetes) and etcd.
# setup-envtest cannot download here, so the module proxy is the only source. Re-runs are no-ops.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

build_kube() {
  local out="$KUBE_BIN_DIR" want=(kube-apiserver kubectl kube-scheduler kube-controller-manager)
  local missing=()
  for b in "${want[@]}"; do [ -x "$out/$b" ] || missing+=("$b"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "building ${missing[*]} ${KUBE_VERSION} into $out"
  local w; w=$(mktemp -d)
  (
    cd "$w"
    go mod init nodelet.local/kubebins >/dev/null 2>&1
    go mod edit -require "k8s.io/kubernetes@${KUBE_VERSION}"
    GOFLAGS=-mod=mod go mod download "k8s.io/kubernetes@${KUBE_VERSION}"
    local modfile
    modfile="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/${KUBE_VERSION}.mod"
    # Every ./staging replace of k8s.io/kubernetes becomes a replace to the published staging module.
    grep -E '^\s*k8s.io/[^ ]+ => ./staging/' "$modfile" | awk '{print $1}' | while read -r m; do
      go mod edit -replace "${m}=${m}@${KUBE_STAGING_VERSION}"
    done
    {
      echo '//go:build tools'
      echo 'package tools'
      echo 'import ('
      for b in "${missing[@]}"; do echo "  _ \"k8s.io/kubernetes/cmd/$b\""; done
      echo ')'
    } > tools.go
    go mod tidy >/dev/null
    local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
    local ld="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld+=" -X $p.gitVersion=${KUBE_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor} -X $p.gitTreeState=clean"
    done
    mkdir -p "$out"
    for b in "${missing[@]}"; do
      CGO_ENABLED=0 go build -tags tools -trimpath -ldflags "$ld" -o "$out/$b.tmp" "k8s.io/kubernetes/cmd/$b"
      mv "$out/$b.tmp" "$out/$b"
    done
  )
  rm -rf "$w"
}

build_etcd() {
  local out="$ETCD_BIN_DIR"
  [ -x "$out/etcd" ] && return 0
  log "building etcd ${ETCD_VERSION} into $out"
  local w; w=$(mktemp -d)
  (
    cd "$w"
    go mod init nodelet.local/etcdbin >/dev/null 2>&1
    go mod edit -require "go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
    printf '//go:build tools\npackage tools\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
    go mod tidy >/dev/null
    mkdir -p "$out"
    CGO_ENABLED=0 go build -tags tools -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3
    mv "$out/etcd.tmp" "$out/etcd"
  )
  rm -rf "$w"
}

case "${1:-all}" in
  kube) build_kube ;;
  etcd) build_etcd ;;
  all) build_etcd; build_kube ;;
esac
# envtest wants etcd, kube-apiserver and kubectl in one folder.
if [ -x "$KUBE_BIN_DIR/kube-apiserver" ] && [ -x "$ETCD_BIN_DIR/etcd" ]; then
  mkdir -p "$ENVTEST_ASSETS"
  for b in kube-apiserver kubectl; do ln -sf "$KUBE_BIN_DIR/$b" "$ENVTEST_ASSETS/$b"; done
  ln -sf "$ETCD_BIN_DIR/etcd" "$ENVTEST_ASSETS/etcd"
fi
