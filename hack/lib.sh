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
