#!/usr/bin/env bash
# Pod start/stop latency benchmark: brings up a test bed of its own (BED_DIR default /var/lib/nodelet-bed-bench),
# runs test/bench (the CRI floor with the node agent stopped, then the kubelet v1.37.1 in nodelet's place on the same
# bed, then nodelet: create → Running, delete → gone, one pod at a time and in a burst, in-place resizes, and the
# idle cost of running pods with what each of nodelet's periodic loops spent
# and the RSS each agent's binary holds at start-up, before any work), and always tears the bed down after.
# BENCH_KUBELET=0 leaves the kubelet out. It prints figures and never judges them: it fails
# only when a phase fails. The output is kept in $BED_DIR/bench.txt. Extra arguments go to the bench program,
# e.g. hack/bench.sh --single 20 --burst 10. The nodelet binary is built into bin/nodelet first unless NODELET_BIN
# names one. Only one bed can run at a time on a machine (fixed ports): this script refuses to start next to one,
# or waits BED_WAIT seconds (default 0) for it to go.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

export BED_DIR=${BED_DIR:-/var/lib/nodelet-bed-bench} BIN_CACHE
BENCH_KUBELET=${BENCH_KUBELET:-1}
# With the kubelet measured the bed is made for it (its host directories), and the bench switches agents.
if [ "$BENCH_KUBELET" = 1 ]; then export AGENT=kubelet; fi
export NODE_NAME=${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}
bed="$here/bed.sh"

build() {
  if [ -n "${NODELET_BIN:-}" ]; then
    [ -x "$NODELET_BIN" ] || die "NODELET_BIN=$NODELET_BIN is not an executable"
  else
    export NODELET_BIN=$REPO_ROOT/bin/nodelet
    log "building $NODELET_BIN"
    go_build_nodelet "$NODELET_BIN" || die "go build of the nodelet binary failed"
  fi
  # Fail before the bed comes up if the bench program does not build (go run below reuses the build cache).
  (cd "$REPO_ROOT" && go build -o /dev/null ./test/bench) || die "go build ./test/bench failed"
}

# bed_busy: what shows another bed: a `bed.sh up` still running (it may not listen yet), or "port pid/command" of
# the first port of a bed (registry, etcd, apiserver, controller-manager, scheduler, nodelet) in use. Empty if none.
bed_busy() {
  local port owner up
  up=$(pgrep -f 'bed\.sh up' | head -1 || true)
  [ -z "$up" ] || { echo "bed.sh-up pid $up"; return 0; }
  for port in 5050 2379 6443 10257 10259 10250; do
    owner=$(ss -Hltnp "sport = :$port" 2>/dev/null | sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\).*/\2\/\1/p' | head -1)
    [ -z "$owner" ] || { echo "$port $owner"; return 0; }
  done
}

# check_no_bed: bringing our bed up (and tearing it down) next to another one would break it. With BED_WAIT=SECONDS,
# wait that long (polling every 30 s) for the other bed to go.
check_no_bed() {
  local busy waited=0 limit=${BED_WAIT:-0}
  while busy=$(bed_busy) && [ -n "$busy" ]; do
    [ "$waited" -lt "$limit" ] ||
      die "another bed is up or coming up ($busy): stop it with its own BED_DIR, or set BED_WAIT"
    log "another bed is up or coming up ($busy): waiting for it to go (${waited}s of ${limit}s)"
    sleep 30
    waited=$((waited + 30))
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
  local extra=()
  if [ "$BENCH_KUBELET" = 1 ]; then extra=(--kubelet); fi
  go run ./test/bench --kubeconfig "$BED_DIR/pki/admin.kubeconfig" "${extra[@]}" \
    --cri-endpoint "unix://$BED_DIR/run/containerd.sock" --node "$NODE_NAME" \
    --bed-script "$bed" --bed-dir "$BED_DIR" "$@" 2>&1 | tee "$out" || rc=$?
  log "bench output kept in $out"
  return "$rc"
}

main "$@"
