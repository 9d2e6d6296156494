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
BUSYBOX_BIN_DIR=$BIN_CACHE/busybox-upstream
CONTAINERD2_VERSION=${CONTAINERD2_VERSION:-v2.4.2}
RUNC_VERSION=${RUNC_VERSION:-v1.5.2}
CONTAINERD2_BIN_DIR=$BIN_CACHE/containerd-$CONTAINERD2_VERSION-runc-$RUNC_VERSION
ENVTEST_ASSETS=$BIN_CACHE/envtest-$KUBE_VERSION-etcd-$ETCD_VERSION

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

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
