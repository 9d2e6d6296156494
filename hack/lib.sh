# Shared settings for the hack/ scripts. Sourced, not run.
# shellcheck shell=bash disable=SC2034 # the variables are used by the scripts that source this file
KUBE_VERSION=${KUBE_VERSION:-v1.37.1}
KUBE_STAGING_VERSION=${KUBE_STAGING_VERSION:-v0.37.1}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
REPO_ROOT=${REPO_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
# Built binaries are cached outside the build tree by version; .cache/ is git-ignored.
BIN_CACHE=${BIN_CACHE:-$REPO_ROOT/.cache}
KUBE_BIN_DIR=$BIN_CACHE/kube-$KUBE_VERSION
ETCD_BIN_DIR=$BIN_CACHE/etcd-$ETCD_VERSION
E2E_BIN_DIR=$BIN_CACHE/e2e-$KUBE_VERSION
# The upstream sample device plugin (test/images/sample-device-plugin), for the device plugin specs.
DEVICE_PLUGIN_BIN=$BIN_CACHE/sample-device-plugin-$KUBE_VERSION/sampledeviceplugin
# The upstream DRA test driver (test/e2e/dra/test-driver), whose kubelet plugin the DRA specs run on the node.
DRA_DRIVER_BIN=$BIN_CACHE/dra-test-driver-$KUBE_VERSION/dra-test-driver
BUSYBOX_BIN_DIR=$BIN_CACHE/busybox-upstream
CONTAINERD2_VERSION=${CONTAINERD2_VERSION:-v2.4.2}
RUNC_VERSION=${RUNC_VERSION:-v1.5.2}
CONTAINERD2_BIN_DIR=$BIN_CACHE/containerd-$CONTAINERD2_VERSION-runc-$RUNC_VERSION
ENVTEST_ASSETS=$BIN_CACHE/envtest-$KUBE_VERSION-etcd-$ETCD_VERSION
# nodelet's build tags. grpcnotrace leaves out gRPC's request tracing (golang.org/x/net/trace), whose HTML
# templates call methods by name through reflection: with them linked, the linker must keep every exported
# method of every type in an interface, a quarter of the binary (62 -> 47 MB) and of its resident pages.
NODELET_BUILD_TAGS=${NODELET_BUILD_TAGS:-grpcnotrace}
# The storage parts of the bed (build-testbins.sh csi): the CSI hostpath driver and sidecars the upstream e2e
# manifests name, and the local-path provisioner kind installs. Sources kept in THIRD_PARTY_DIR (archives of
# upstream commits the module proxy refuses; see its README.md) and modules from the proxy:
# "binary module version package" (package relative to the module, "." for its root).
THIRD_PARTY_DIR=${THIRD_PARTY_DIR:-$REPO_ROOT/../shared/third_party}
[ -d "$THIRD_PARTY_DIR" ] || THIRD_PARTY_DIR=/work/shared/third_party
CSI_THIRD_PARTY=( # binary archive-prefix package
  "hostpathplugin csi-driver-host-path cmd/hostpathplugin"
  "csi-node-driver-registrar node-driver-registrar cmd/csi-node-driver-registrar"
  "livenessprobe livenessprobe cmd/livenessprobe"
  "csi-external-health-monitor-controller external-health-monitor cmd/csi-external-health-monitor-controller"
)
CSI_SNAPSHOTTER_VERSION=${CSI_SNAPSHOTTER_VERSION:-v8.6.0}
# kind's default storage (hack/storage.sh installs it as kind does: pkg/build/nodeimage/const_storage.go).
KIND_VERSION=${KIND_VERSION:-v0.33.0}
CSI_MODULES=( # binary module version package
  "csi-provisioner github.com/kubernetes-csi/external-provisioner/v6 v6.3.0 cmd/csi-provisioner"
  "csi-attacher github.com/kubernetes-csi/external-attacher/v4 v4.12.0 cmd/csi-attacher"
  "csi-resizer github.com/kubernetes-csi/external-resizer/v2 v2.2.0 cmd/csi-resizer"
  "csi-snapshotter github.com/kubernetes-csi/external-snapshotter/v8 $CSI_SNAPSHOTTER_VERSION cmd/csi-snapshotter"
  "snapshot-controller github.com/kubernetes-csi/external-snapshotter/v8 $CSI_SNAPSHOTTER_VERSION cmd/snapshot-controller"
  "csi-snapshot-metadata github.com/kubernetes-csi/external-snapshot-metadata v1.0.0 cmd/csi-snapshot-metadata"
  # kind's default storage runs v0.0.34, which the module proxy does not serve; v0.0.30 is the newest it serves
  # with a checksum database entry.
  "local-path-provisioner github.com/rancher/local-path-provisioner v0.0.30 ."
)
# mod_dir MODULE@VERSION: the module's folder in the module cache, downloaded first if needed.
mod_dir() {
  local d
  d=$(cd / && GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$d" ] || die "go mod download $1 failed"
  echo "$d"
}
# csi_bin_dir: the folder of the storage binaries, keyed by every version and archive above.
csi_bin_dir() {
  local key
  key=$( { printf '%s\n' "${CSI_MODULES[@]}" "${CSI_THIRD_PARTY[@]}"; (cd "$THIRD_PARTY_DIR" && ls -- *.tar.gz); } 2>/dev/null |
    sha256sum | cut -c1-12)
  echo "$BIN_CACHE/csi-$key"
}
CSI_BIN_DIR=$(csi_bin_dir)

# go_build_nodelet OUT [go build flags...]: builds nodelet (static, with its build tags) to OUT.
go_build_nodelet() {
  local out=$1; shift
  (cd "$REPO_ROOT" && CGO_ENABLED=0 go build -tags "$NODELET_BUILD_TAGS" -trimpath "$@" -o "$out" .)
}
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# host_dir BED_DIR DIR: DIR exists (made if missing) and is noted in BED_DIR/host-dirs, "made DIR" when this made
# it, "used DIR" when it was there: `bed.sh down` unmounts what is left mounted under every noted folder, and
# `bed.sh clean` deletes the ones the bed made.
host_dir() {
  local list=$1/host-dirs state=used
  if ! grep -qxF -e "made $2" -e "used $2" "$list" 2>/dev/null; then
    [ -d "$2" ] || state=made
    mkdir -p "$1"
    echo "$state $2" >> "$list"
  fi
  mkdir -p "$2"
}

# mount_cgroup_controllers: every cgroup v1 controller the kernel has, mounted on the host as a systemd host has
# them (net_cls and net_prio together; hugetlb, which this VM's init leaves unmounted, among them), so that the
# agent and runc set every limit a node's kubelet sets. hack/systemd.sh runs it before its systemd starts:
# systemd mounts the ones it finds unmounted, and inside its mount namespace that would leave hierarchies no
# host process can see in mountinfo (containerd's task metrics then fail for every container). Nothing on
# cgroup v2 (one hierarchy). Needs root.
mount_cgroup_controllers() {
  local c name remounted=""
  [ "$(stat -fc %T /sys/fs/cgroup)" = tmpfs ] || return 0 # cgroup v2: one hierarchy
  while read -r c _ _ enabled; do
    [ "$enabled" = 1 ] || continue
    name=$c
    case $c in net_cls | net_prio) name=net_cls,net_prio ;; esac
    grep -qE " - cgroup [^ ]+ (.*,)?$name(,|\$)" /proc/self/mountinfo && continue
    awk '$5 == "/sys/fs/cgroup/'"$name"'"' /proc/self/mountinfo | grep -q . && continue
    if [ -z "$remounted" ]; then mount -o remount,rw /sys/fs/cgroup; remounted=1; fi
    mkdir -p "/sys/fs/cgroup/$name"
    if mount -t cgroup -o "$name" cgroup "/sys/fs/cgroup/$name"; then
      log "mounted the $name cgroup hierarchy"
    else
      log "warning: cannot mount the $name cgroup hierarchy"
    fi
  done < <(grep -v '^#' /proc/cgroups)
  if [ -n "$remounted" ]; then
    ln -sfn net_cls,net_prio /sys/fs/cgroup/net_cls 2>/dev/null || true
    ln -sfn net_cls,net_prio /sys/fs/cgroup/net_prio 2>/dev/null || true
    mount -o remount,ro /sys/fs/cgroup || true
  fi
}

# pod_leaks NS ROOT UIDS...: what the bed's runtime, the agent's root dir ROOT, the mounts and the pod cgroups
# still hold of the pods of namespace NS with these UIDs (deleted ones): " sandboxes:N containers:N pod-dirs:N
# mounts:N cgroups:N" for each kind that is not empty, " none" when nothing is left. Needs BED_DIR.
pod_leaks() {
  local ns=$1 root=$2 out="" uid n sandboxes
  shift 2
  local crictl=("$BED_DIR/bin/crictl" -r "unix://$BED_DIR/run/containerd.sock")
  # hack/crictl's tables: pods "ID AGE ago STATE NAME NAMESPACE ATTEMPT", ps "ID IMAGE AGE ago STATE NAME ATTEMPT POD".
  sandboxes=$("${crictl[@]}" pods | awk -v ns="$ns" 'NR > 1 && $6 == ns { print $1 }')
  n=$(echo "$sandboxes" | grep -c . || true)
  [ "$n" = 0 ] || out+=" sandboxes:$n"
  n=$("${crictl[@]}" ps -a | awk -v s="$sandboxes" 'BEGIN { split(s, ids); for (i in ids) mine[ids[i]] = 1 } NR > 1 && ($8 in mine)' | grep -c . || true)
  [ "$n" = 0 ] || out+=" containers:$n"
  n=0
  for uid in "$@"; do [ -e "$root/pods/$uid" ] && n=$((n + 1)); done
  [ "$n" = 0 ] || out+=" pod-dirs:$n"
  n=0
  for uid in "$@"; do grep -q "/pods/$uid/" /proc/self/mountinfo && n=$((n + 1)); done
  [ "$n" = 0 ] || out+=" mounts:$n"
  n=0
  for uid in "$@"; do
    find /sys/fs/cgroup/memory/kubepods* /sys/fs/cgroup/kubepods* -maxdepth 3 -type d \
      \( -name "pod$uid" -o -name "*pod${uid//-/_}.slice" \) 2>/dev/null | grep -q . && n=$((n + 1))
  done
  [ "$n" = 0 ] || out+=" cgroups:$n"
  echo "${out:- none}"
}

# kind_storage_manifest: kind's default storage manifest with its image constants filled in.
kind_storage_manifest() {
  local src prov helper
  src="$(mod_dir "sigs.k8s.io/kind@$KIND_VERSION")/pkg/build/nodeimage/const_storage.go"
  prov=$(sed -n 's/^const storageProvisionerImage = "\(.*\)"$/\1/p' "$src")
  helper=$(sed -n 's/^const storageHelperImage = "\(.*\)"$/\1/p' "$src")
  if [ -z "$prov" ] || [ -z "$helper" ]; then die "no storage image constants in $src"; fi
  awk '/^const defaultStorageManifest = `/ { on = 1; next } on && /^`/ { exit } on { print }' "$src" |
    sed -e "s|\` + storageProvisionerImage + \`|$prov|g" -e "s|\` + storageHelperImage + \`|$helper|g"
}
