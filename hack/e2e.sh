#!/usr/bin/env bash
# End-to-end suite: brings up a test bed of its own (BED_DIR default /var/lib/nodelet-bed-e2e, apart from a
# developer's `bed.sh up`), runs `go test ./test/e2e/...` against it, and always tears the bed down after.
# The nodelet binary is built into bin/nodelet first unless NODELET_BIN names one. Extra arguments go to go test,
# e.g. hack/e2e.sh -run 'TestPods/restart'. Set KEEP_BED=1 to leave the bed up for a look afterwards.
# E2E_LABELS is the ginkgo label filter: by default every spec but those labelled storage-bed, which need the
# storage bed (containerd 2.x, the CSI hostpath driver; make e2e-storage), and logind-bed, which need the bed under systemd
# with logind (make e2e-systemd).
# Only one bed can run at a time on a machine (fixed ports); stop any other with its own BED_DIR first.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

export BED_DIR=${BED_DIR:-/var/lib/nodelet-bed-e2e} BIN_CACHE
bed="$here/bed.sh"

build_nodelet() {
  if [ -n "${NODELET_BIN:-}" ]; then
    [ -x "$NODELET_BIN" ] || die "NODELET_BIN=$NODELET_BIN is not an executable"
    return 0
  fi
  export NODELET_BIN=$REPO_ROOT/bin/nodelet
  log "building $NODELET_BIN"
  go_build_nodelet "$NODELET_BIN" || die "go build of the nodelet binary failed"
}

teardown() {
  local rc=$?
  if [ "${KEEP_BED:-}" = 1 ]; then
    log "KEEP_BED=1: bed left up in $BED_DIR (stop it with: BED_DIR=$BED_DIR $bed down)"
  else
    bash "$bed" down || log "warning: bed.sh down failed"
  fi
  exit "$rc"
}

main() {
  [ -d "$REPO_ROOT/test/e2e" ] || die "no $REPO_ROOT/test/e2e folder: nothing to run"
  build_nodelet
  trap teardown EXIT
  bash "$bed" up
  export NODELET_BED_DIR=$BED_DIR NODELET_BED_SCRIPT=$bed KUBECONFIG=$BED_DIR/pki/admin.kubeconfig KUBECTL=$KUBE_BIN_DIR/kubectl \
    DRA_DRIVER_BIN
  cd "$REPO_ROOT"
  go test ./test/e2e/... -v -count=1 -timeout 30m -ginkgo.label-filter="${E2E_LABELS:-!storage-bed && !logind-bed}" "$@"
}

main "$@"
