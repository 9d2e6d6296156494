#!/usr/bin/env bash
# Pod start/stop latency benchmark: brings up a test bed of its own (BED_DIR default /var/lib/nodelet-bed-bench),
# runs test/bench (the CRI floor with nodelet stopped, then nodelet: create → Running, delete → gone, one pod at a
# time and in a burst), and always tears the bed down after. It prints figures and never judges them: it fails
# only when a phase fails. The output is kept in $BED_DIR/bench.txt. Extra arguments go to the bench program,
# e.g. hack/bench.sh --single 20 --burst 10. The nodelet binary is built into bin/nodelet first unless NODELET_BIN
# names one. Only one bed can run at a time on a machine (fixed ports): this script refuses to start next to one.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

export BED_DIR=${BED_DIR:-/var/lib/nodelet-bed-bench} BIN_CACHE
export NODE_NAME=${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}
bed="$here/bed.sh"

build() {
  if [ -n "${NODELET_BIN:-}" ]; then
    [ -x "$NODELET_BIN" ] || die "NODELET_BIN=$NODELET_BIN is not an executable"
  else
    export NODELET_BIN=$REPO_ROOT/bin/nodelet
    log "building $NODELET_BIN"
    (cd "$REPO_ROOT" && go build -o "$NODELET_BIN" .) || die "go build of the nodelet binary failed"
  fi
  # Fail before the bed comes up if the bench program does not build (go run below reuses the build cache).
  (cd "$REPO_ROOT" && go build -o /dev/null ./test/bench) || die "go build ./test/bench failed"
}

# check_no_bed: another bed's ports are taken; bringing ours up (and tearing it down) next to it would break it.
check_no_bed() {
  local port owner
  for port in 6443 2379; do
    owner=$(ss -Hltnp "sport = :$port" 2>/dev/null | sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\).*/\2\/\1/p' | head -1)
    [ -z "$owner" ] || die "port $port is in use by $owner: another bed is up (stop it with its own BED_DIR first)"
  done
}

teardown() {
  local rc=$?
  bash "$bed" down || log "warning: bed.sh down failed"
  exit "$rc"
}

main() {
  [ "$(id -u)" -eq 0 ] || die "the bed needs root"
  build
  check_no_bed
  trap teardown EXIT
  bash "$bed" up
  local out=$BED_DIR/bench.txt rc=0
  cd "$REPO_ROOT"
  go run ./test/bench --kubeconfig "$BED_DIR/pki/admin.kubeconfig" \
    --cri-endpoint "unix://$BED_DIR/run/containerd.sock" --node "$NODE_NAME" \
    --bed-script "$bed" --bed-dir "$BED_DIR" "$@" 2>&1 | tee "$out" || rc=$?
  log "bench output kept in $out"
  return "$rc"
}

main "$@"
