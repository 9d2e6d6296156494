#!/usr/bin/env bash
# Builds the test bed's Kubernetes and etcd binaries from the Go module proxy into a cache folder keyed by
# version: kube-apiserver, kubectl, kube-scheduler, kube-controller-manager (k8s.io/kubernetes) and etcd; on request
# the kubelet (`kubelet`), kubeadm and kube-proxy for kind node images (`kind`, `coredns VERSION`,
# `flannel VERSION`), the upstream conformance suite with its test image binaries (`e2e`) and the conformance
# image's go-runner (`gorunner`), the Aggregator spec's sample API server (`sampleapiserver`), and the storage parts:
# CSI hostpath driver, sidecars, snapshot controller and local-path provisioner (`csi`).
# setup-envtest cannot download here, so the module proxy is the only source. Re-runs are no-ops.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

# kube_wrapper DIR IMPORT...: a throwaway module in DIR that requires k8s.io/kubernetes and replaces each of its
# ./staging modules with the published one, with a tools.go blank-importing the given packages, tidied.
kube_wrapper() {
  local w=$1; shift
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
      for p in "$@"; do echo "  _ \"$p\""; done
      echo ')'
    } > tools.go
    go mod tidy >/dev/null
  )
}

# kube_ldflags: stamp the Kubernetes version, or the binaries report v0.0.0.
kube_ldflags() {
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=${KUBE_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor} -X $p.gitTreeState=clean"
  done
  echo "$ld"
}

# build_kube [BINARY...]: the control plane binaries (default) or the named cmd/ binaries, e.g. kubelet.
build_kube() {
  local out="$KUBE_BIN_DIR" want=("$@")
  [ ${#want[@]} -gt 0 ] || want=(kube-apiserver kubectl kube-scheduler kube-controller-manager)
  local missing=() pkgs=()
  for b in "${want[@]}"; do [ -x "$out/$b" ] || missing+=("$b"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "building ${missing[*]} ${KUBE_VERSION} into $out"
  for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  local w; w=$(mktemp -d)
  kube_wrapper "$w" "${pkgs[@]}"
  (
    cd "$w"
    local ld; ld=$(kube_ldflags)
    mkdir -p "$out"
    for b in "${missing[@]}"; do
      CGO_ENABLED=0 go build -tags tools -trimpath -ldflags "$ld" -o "$out/$b.tmp" "k8s.io/kubernetes/cmd/$b"
      mv "$out/$b.tmp" "$out/$b"
    done
  )
  rm -rf "$w"
}

# build_e2e: the upstream conformance suite and what it needs, into $E2E_BIN_DIR: e2e.test, ginkgo, and the
# e2e test images' binaries built from their module packages: agnhost and nnp (the nonewprivs image); and nginx.
build_e2e() {
  local out="$E2E_BIN_DIR" b missing=()
  fetch_nginx
  for b in e2e.test ginkgo agnhost nnp; do [ -x "$out/$b" ] || missing+=("$b"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "building ${missing[*]} (${KUBE_VERSION}) into $out"
  local src imports
  src="$(go env GOMODCACHE)/k8s.io/kubernetes@${KUBE_VERSION}"
  [ -d "$src" ] || GOFLAGS=-mod=mod go mod download "k8s.io/kubernetes@${KUBE_VERSION}"
  # Every non-standard import of test/e2e/e2e_test.go, so that `go test -c` finds them all in the wrapper.
  mapfile -t imports < <(sed -n '/^import (/,/^)/p' "$src/test/e2e/e2e_test.go" | grep -o '"[^"]*\.[^"]*"' | tr -d '"')
  local w; w=$(mktemp -d)
  kube_wrapper "$w" "${imports[@]}" k8s.io/kubernetes/test/e2e k8s.io/kubernetes/test/images/agnhost \
    k8s.io/kubernetes/test/images/nonewprivs github.com/onsi/ginkgo/v2/ginkgo
  (
    cd "$w"
    local ld; ld=$(kube_ldflags)
    mkdir -p "$out"
    CGO_ENABLED=0 go test -c -trimpath -ldflags "$ld" -o "$out/e2e.test.tmp" k8s.io/kubernetes/test/e2e
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/ginkgo.tmp" github.com/onsi/ginkgo/v2/ginkgo
    CGO_ENABLED=0 go build -tags tools -trimpath -ldflags "$ld" -o "$out/agnhost.tmp" k8s.io/kubernetes/test/images/agnhost
    CGO_ENABLED=0 go build -tags tools -trimpath -ldflags "-s -w" -o "$out/nnp.tmp" k8s.io/kubernetes/test/images/nonewprivs
    for b in e2e.test ginkgo agnhost nnp; do mv "$out/$b.tmp" "$out/$b"; done
  )
  rm -rf "$w"
}

# build_go_runner: the conformance image's entrypoint (k8s.io/kubernetes/test/conformance/image/go-runner), which
# runs ginkgo with e2e.test as the image's E2E_* environment says and keeps the results, into $E2E_BIN_DIR.
build_go_runner() {
  local out="$E2E_BIN_DIR/go-runner"
  [ -x "$out" ] && return 0
  log "building go-runner (${KUBE_VERSION}) into $out"
  local w; w=$(mktemp -d)
  kube_wrapper "$w" k8s.io/kubernetes/test/conformance/image/go-runner
  (
    cd "$w"
    mkdir -p "$E2E_BIN_DIR"
    CGO_ENABLED=0 go build -tags tools -trimpath -ldflags "-s -w" -o "$out.tmp" k8s.io/kubernetes/test/conformance/image/go-runner
    mv "$out.tmp" "$out"
  )
  rm -rf "$w"
}

# build_sample_apiserver: k8s.io/sample-apiserver (the wardle.example.com API server the Aggregator conformance
# spec registers) at the staging release, into $E2E_BIN_DIR, for the e2e sample-apiserver image.
build_sample_apiserver() {
  local out="$E2E_BIN_DIR/sample-apiserver"
  [ -x "$out" ] && return 0
  log "building k8s.io/sample-apiserver@${KUBE_STAGING_VERSION} into $out"
  local w; w=$(mktemp -d)
  (
    cd "$w"
    go mod init nodelet.local/sampleapiserver >/dev/null 2>&1
    GOFLAGS=-mod=mod go get "k8s.io/sample-apiserver@${KUBE_STAGING_VERSION}" >/dev/null
    mkdir -p "$E2E_BIN_DIR"
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$out.tmp" k8s.io/sample-apiserver
    mv "$out.tmp" "$out"
  )
  rm -rf "$w"
}

# build_device_plugin: the upstream sample device plugin (two devices of example.com/resource), into
# $DEVICE_PLUGIN_BIN, for the bed's sample-device-plugin image.
build_device_plugin() {
  [ -x "$DEVICE_PLUGIN_BIN" ] && return 0
  log "building the sample device plugin (${KUBE_VERSION}) into $DEVICE_PLUGIN_BIN"
  local w; w=$(mktemp -d)
  kube_wrapper "$w" k8s.io/kubernetes/test/images/sample-device-plugin
  (
    cd "$w"
    mkdir -p "$(dirname "$DEVICE_PLUGIN_BIN")"
    CGO_ENABLED=0 go build -tags tools -trimpath -ldflags "-s -w" -o "$DEVICE_PLUGIN_BIN.tmp" k8s.io/kubernetes/test/images/sample-device-plugin
    mv "$DEVICE_PLUGIN_BIN.tmp" "$DEVICE_PLUGIN_BIN"
  )
  rm -rf "$w"
}

# build_dra_driver: the upstream DRA test driver (test/e2e/dra/test-driver: its kubelet-plugin command publishes
# four devices of test-driver.cdi.k8s.io and prepares claims with a CDI spec of environment variables), into
# $DRA_DRIVER_BIN, for the DRA specs of the e2e suite.
build_dra_driver() {
  [ -x "$DRA_DRIVER_BIN" ] && return 0
  log "building the DRA test driver (${KUBE_VERSION}) into $DRA_DRIVER_BIN"
  local w; w=$(mktemp -d)
  kube_wrapper "$w" k8s.io/kubernetes/test/e2e/dra/test-driver
  (
    cd "$w"
    mkdir -p "$(dirname "$DRA_DRIVER_BIN")"
    CGO_ENABLED=0 go build -tags tools -trimpath -ldflags "-s -w" -o "$DRA_DRIVER_BIN.tmp" k8s.io/kubernetes/test/e2e/dra/test-driver
    mv "$DRA_DRIVER_BIN.tmp" "$DRA_DRIVER_BIN"
  )
  rm -rf "$w"
}

# private_apt DIR TYPE: apt state of its own under DIR (the machine's apt configuration is not touched) whose one
# source is this distribution's main archive as TYPE (deb or deb-src), updated; the options apt-get needs for it
# are left in APT_OPTS.
private_apt() {
  local w=$1 codename
  codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
  [ -n "$codename" ] || die "cannot tell this distribution's codename from /etc/os-release"
  mkdir -p "$w/lists/partial" "$w/cache/archives/partial"
  echo "$2 [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $codename main" > "$w/sources.list"
  APT_OPTS=(-o "Dir::Etc::sourcelist=$w/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$w/lists"
    -o "Dir::Cache=$w/cache" -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root)
  apt-get "${APT_OPTS[@]}" -qq update
}

# fetch_nginx: the nginx of this distribution (Debian's nginx package: the binary, and nginx-common's mime.types)
# into $E2E_BIN_DIR, for the e2e nginx image.
fetch_nginx() {
  local out="$E2E_BIN_DIR"
  [ -x "$out/nginx" ] && [ -f "$out/nginx-mime.types" ] && return 0
  log "fetching Debian's nginx into $out"
  local w; w=$(mktemp -d)
  (
    private_apt "$w" deb
    cd "$w"
    apt-get "${APT_OPTS[@]}" -qq download nginx nginx-common
    mkdir x
    for d in nginx_*.deb nginx-common_*.deb; do dpkg-deb -x "$d" x; done
    mkdir -p "$out"
    cp x/etc/nginx/mime.types "$out/nginx-mime.types"
    cp x/usr/sbin/nginx "$out/nginx.tmp"
    mv "$out/nginx.tmp" "$out/nginx"
  )
  rm -rf "$w"
}

# build_containerd2: containerd 2.x (containerd, containerd-shim-runc-v2, ctr) and a current runc, for beds run
# with CONTAINERD=2. runc needs cgo and libseccomp (Debian's libseccomp-dev, installed by install-deps.sh).
build_containerd2() {
  local out="$CONTAINERD2_BIN_DIR" b missing=()
  for b in containerd containerd-shim-runc-v2 ctr runc; do [ -x "$out/$b" ] || missing+=("$b"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "building containerd ${CONTAINERD2_VERSION} and runc ${RUNC_VERSION} into $out"
  local w; w=$(mktemp -d)
  (
    cd "$w"
    go mod init nodelet.local/containerd2 >/dev/null 2>&1
    go mod edit -require "github.com/containerd/containerd/v2@${CONTAINERD2_VERSION}" \
      -require "github.com/opencontainers/runc@${RUNC_VERSION}"
    printf '//go:build tools\npackage tools\nimport (\n_ "github.com/containerd/containerd/v2/cmd/containerd"\n_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"\n_ "github.com/containerd/containerd/v2/cmd/ctr"\n_ "github.com/opencontainers/runc"\n)\n' > tools.go
    go mod tidy >/dev/null
    mkdir -p "$out"
    local ld="-s -w -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD2_VERSION}"
    for b in containerd containerd-shim-runc-v2 ctr; do
      CGO_ENABLED=0 go build -tags tools,no_btrfs,no_devmapper,no_zfs -trimpath -ldflags "$ld" -o "$out/$b.tmp" \
        "github.com/containerd/containerd/v2/cmd/$b"
      mv "$out/$b.tmp" "$out/$b"
    done
    CGO_ENABLED=1 go build -tags tools,seccomp -trimpath -ldflags "-s -w -X main.version=${RUNC_VERSION#v}" \
      -o "$out/runc.tmp" github.com/opencontainers/runc
    mv "$out/runc.tmp" "$out/runc"
  )
  rm -rf "$w"
}

# build_busybox: a static busybox built from Debian's source package of this distribution's busybox, as its
# upstream authors ship it (the orig tarball, `make defconfig`, static), for the bed's busybox images. Debian's
# own busybox-static carries a patch that makes ash drop environment variables whose names are not shell
# identifiers (e.g. "data-1"); upstream ash, and so the upstream e2e busybox image, passes them on to commands,
# which the ConfigMap/Secret "consumable via the environment" specs check with `sh -c env`. The source comes
# through apt with a state of its own (private_apt).
build_busybox() {
  local out="$BUSYBOX_BIN_DIR"
  [ -x "$out/busybox" ] && return 0
  log "building busybox from Debian's source package into $out"
  local w; w=$(mktemp -d)
  (
    private_apt "$w" deb-src
    cd "$w"
    mkdir -p src
    (cd src && apt-get "${APT_OPTS[@]}" -qq source --download-only busybox)
    local orig
    orig=$(ls src/busybox_*.orig.tar.*)
    tar xf "$orig" -C src
    cd src/busybox-*/
    make -s defconfig >/dev/null
    # Static, and without tc (it does not build against current kernel headers); everything else as upstream.
    sed -i 's/^# CONFIG_STATIC is not set/CONFIG_STATIC=y/; s/^CONFIG_TC=y/# CONFIG_TC is not set/' .config
    make -s -j"$(nproc)" busybox >/dev/null 2>&1 || make -j1 busybox
    mkdir -p "$out"
    cp busybox "$out/busybox.tmp"
    mv "$out/busybox.tmp" "$out/busybox"
  )
  rm -rf "$w"
}

# replaces_of GOMOD: MODULE's replace directives, one "old old-version new new-version" per line (a version
# field is "-" when absent).
replaces_of() {
  awk '/^replace[ \t]*\(/ { blk = 1; next } blk && /^\)/ { blk = 0; next }
    blk || /^replace[ \t]/ { sub(/^replace[ \t]+/, ""); sub(/\/\/.*/, ""); if (NF) print }' "$1" |
    while read -r a b c d e; do
      if [ "$b" = "=>" ]; then echo "$a - $c ${d:--}"; else echo "$a $b $d ${e:--}"; fi
    done
}

# proxy_wrapper DIR MODULE VERSION PACKAGE...: a throwaway module in DIR that requires MODULE@VERSION with
# MODULE's own replace directives (a dependency's replaces do not apply, and `go install` refuses a module that
# has any), and a tools.go blank-importing the packages, tidied. A replace of a nested module by its folder
# (./client: not in MODULE's zip) becomes a requirement of that module at VERSION when the proxy serves it.
proxy_wrapper() {
  local w=$1 mod=$2 ver=$3; shift 3
  (
    cd "$w"
    go mod init nodelet.local/csibins >/dev/null 2>&1
    go mod edit -require "$mod@$ver"
    local gomod old over new nver
    gomod=$(GOFLAGS=-mod=mod go mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    [ -f "$gomod" ] || die "go mod download $mod@$ver gave no go.mod"
    while read -r old over new nver; do
      if [ "$nver" != - ]; then
        go mod edit -replace "$old$([ "$over" = - ] || echo "@$over")=$new@$nver"
      elif GOFLAGS=-mod=mod go mod download "$old@$ver" >/dev/null 2>&1; then
        go mod edit -require "$old@$ver"
      fi
    done < <(replaces_of "$gomod")
    {
      echo '//go:build tools'
      echo 'package tools'
      echo 'import ('
      for p in "$@"; do echo "  _ \"$p\""; done
      echo ')'
    } > tools.go
    go mod tidy >/dev/null
  )
}

# build_csi_module MODULE VERSION BINARY=PACKAGE...: the named binaries of one proxy module, into $CSI_BIN_DIR.
build_csi_module() {
  local mod=$1 ver=$2; shift 2
  local w bp pkgs=()
  for bp in "$@"; do pkgs+=("$mod${bp#*=}"); done
  log "building ${*%%=*} ($mod $ver) into $CSI_BIN_DIR"
  w=$(mktemp -d)
  proxy_wrapper "$w" "$mod" "$ver" "${pkgs[@]}"
  (
    cd "$w"
    for bp in "$@"; do
      CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$ver -X main.VERSION=$ver" \
        -o "$CSI_BIN_DIR/${bp%%=*}.tmp" "$mod${bp#*=}"
      mv "$CSI_BIN_DIR/${bp%%=*}.tmp" "$CSI_BIN_DIR/${bp%%=*}"
    done
  )
  rm -rf "$w"
}

# build_csi_third_party BINARY ARCHIVE-PREFIX PACKAGE: one binary from its archive in THIRD_PARTY_DIR, built in
# module mode in a scratch copy (the archives carry no vendor/ folder).
build_csi_third_party() {
  local bin=$1 prefix=$2 pkg=$3 archives archive w
  archives=("$THIRD_PARTY_DIR/$prefix"-*.tar.gz)
  [ -f "${archives[0]}" ] || die "no $prefix-*.tar.gz in THIRD_PARTY_DIR=$THIRD_PARTY_DIR"
  [ ${#archives[@]} -eq 1 ] || die "more than one $prefix-*.tar.gz in $THIRD_PARTY_DIR"
  archive=${archives[0]}
  log "building $bin from $(basename "$archive") into $CSI_BIN_DIR"
  w=$(mktemp -d)
  tar -xzf "$archive" -C "$w"
  (
    cd "$w/$prefix"
    local commit=${archive##*-}; commit=${commit%.tar.gz}
    GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$commit" \
      -o "$CSI_BIN_DIR/$bin.tmp" "./$pkg"
    mv "$CSI_BIN_DIR/$bin.tmp" "$CSI_BIN_DIR/$bin"
  )
  rm -rf "$w"
}

# build_csi: the storage parts of the bed, into $CSI_BIN_DIR: the CSI hostpath driver and the sidecars of the
# upstream e2e manifests, the snapshot controller, and the local-path provisioner. Only missing binaries are built.
build_csi() {
  local e bin mod ver pkg key prefix
  local -A bins_of=()
  local order=()
  mkdir -p "$CSI_BIN_DIR"
  for e in "${CSI_THIRD_PARTY[@]}"; do
    read -r bin prefix pkg <<< "$e"
    [ -x "$CSI_BIN_DIR/$bin" ] || build_csi_third_party "$bin" "$prefix" "$pkg"
  done
  for e in "${CSI_MODULES[@]}"; do
    read -r bin mod ver pkg <<< "$e"
    [ -x "$CSI_BIN_DIR/$bin" ] && continue
    key="$mod $ver"
    [ -n "${bins_of[$key]:-}" ] || order+=("$key")
    if [ "$pkg" = . ]; then pkg=""; else pkg="/$pkg"; fi
    bins_of[$key]+=" $bin=$pkg"
  done
  for key in "${order[@]}"; do
    # shellcheck disable=SC2086 # word splitting wanted: "module version" and the binary list
    build_csi_module $key ${bins_of[$key]}
  done
  printf '%s\n' "${CSI_THIRD_PARTY[@]}" "${CSI_MODULES[@]}" > "$CSI_BIN_DIR/versions.txt"
  ls "$THIRD_PARTY_DIR"/*.tar.gz >> "$CSI_BIN_DIR/versions.txt"
}

build_etcd() {
  local out="$ETCD_BIN_DIR"
  [ -x "$out/etcd" ] && return 0
  log "building etcd ${ETCD_VERSION} into $out"
  build_tool "$out/etcd" "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" go.etcd.io/etcd/server/v3 0 "-s -w"
}

# build_tool OUT MODULE@VERSION PACKAGE CGO LDFLAGS [REPLACE...]: the main package PACKAGE of MODULE@VERSION, built
# into OUT through a throwaway module that requires it (and replaces what each REPLACE, old=new@version, names).
build_tool() {
  local out=$1 modver=$2 pkg=$3 cgo=$4 ld=$5
  shift 5
  local w rc=0
  w=$(mktemp -d)
  (
    cd "$w"
    go mod init nodelet.local/tool >/dev/null 2>&1
    go mod edit -require "$modver" "${@/#/-replace=}"
    printf '//go:build tools\npackage tools\nimport _ "%s"\n' "$pkg" > tools.go
    GOFLAGS=-mod=mod go mod tidy >/dev/null
    mkdir -p "$(dirname "$out")"
    CGO_ENABLED=$cgo go build -tags tools -trimpath -ldflags "$ld" -o "$out.tmp" "$pkg"
    mv "$out.tmp" "$out"
  ) || rc=$?
  rm -rf "$w"
  return "$rc"
}

# build_coredns VERSION: CoreDNS (github.com/coredns/coredns, its default plugins) into $BIN_CACHE/coredns-VERSION.
build_coredns() {
  local v=$1 out="$BIN_CACHE/coredns-$1"
  [ -x "$out/coredns" ] && return 0
  log "building CoreDNS $v into $out"
  build_tool "$out/coredns" "github.com/coredns/coredns@$v" github.com/coredns/coredns 0 "-s -w"
}

# build_flannel VERSION: flanneld (github.com/flannel-io/flannel) into $BIN_CACHE/flannel-VERSION, the CNI network
# of the kind clusters (kind's own, kindnetd, is on no module proxy). Its tencentvpc backend names an SDK
# version the proxy refuses: the throwaway module replaces it with one it serves. cgo: the udp backend.
FLANNEL_TENCENT_VPC=${FLANNEL_TENCENT_VPC:-v1.0.800}
build_flannel() {
  local v=$1 out="$BIN_CACHE/flannel-$1"
  [ -x "$out/flanneld" ] && return 0
  log "building flanneld $v into $out"
  build_tool "$out/flanneld" "github.com/flannel-io/flannel@$v" github.com/flannel-io/flannel 1 \
    "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$v" \
    "github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc=github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc@$FLANNEL_TENCENT_VPC"
}

case "${1:-all}" in
  kube) build_kube ;;
  etcd) build_etcd ;;
  kubelet) build_kube kubelet ;;
  kind) build_kube kubelet kubeadm kube-proxy ;;
  coredns) build_coredns "${2:?usage: build-testbins.sh coredns VERSION}" ;;
  flannel) build_flannel "${2:?usage: build-testbins.sh flannel VERSION}" ;;
  e2e) build_e2e ;;
  containerd2) build_containerd2 ;;
  busybox) build_busybox ;;
  csi) build_csi ;;
  deviceplugin) build_device_plugin ;;
  dradriver) build_dra_driver ;;
  gorunner) build_go_runner ;;
  sampleapiserver) build_sample_apiserver ;;
  all) build_etcd; build_kube; build_busybox; build_device_plugin; build_dra_driver ;;
  *) die "usage: build-testbins.sh [all|kube|etcd|kubelet|kind|coredns VERSION|flannel VERSION|e2e|containerd2|busybox|csi|deviceplugin|dradriver|gorunner|sampleapiserver]" ;;
esac
# envtest wants etcd, kube-apiserver and kubectl in one folder.
if [ -x "$KUBE_BIN_DIR/kube-apiserver" ] && [ -x "$ETCD_BIN_DIR/etcd" ]; then
  mkdir -p "$ENVTEST_ASSETS"
  for b in kube-apiserver kubectl; do ln -sf "$KUBE_BIN_DIR/$b" "$ENVTEST_ASSETS/$b"; done
  ln -sf "$ETCD_BIN_DIR/etcd" "$ENVTEST_ASSETS/etcd"
fi
