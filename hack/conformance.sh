#!/usr/bin/env bash
# Upstream conformance: runs the Kubernetes project's own e2e [NodeConformance] specs (e2e.test of KUBE_VERSION,
# built from the Go module proxy) against a bed of its own whose node agent is nodelet, or with AGENT=kubelet the
# real kubelet of the same version on the same bed, for comparison. Builds what it needs first (e2e.test, ginkgo,
# the e2e test images' binaries; the kubelet when asked), serves the upstream test images from the bed's registry
# under their registry.k8s.io names, and tears the bed down afterwards (KEEP_BED=1 keeps it).
#
# Settings: FOCUS, SKIP (ginkgo regular expressions), PROCS (parallel ginkgo processes, default 4), AGENT
# (nodelet|kubelet), CONTAINERD (1|2), SPEC_TIMEOUT (ginkgo --timeout, default 2h), BED_DIR (default /var/lib/nodelet-bed-conformance).
# Prints one line "conformance: N passed, M failed, K skipped" and the failed specs; the reports (ginkgo JSON and
# JUnit, the passed-spec list) and every component's log stay under $BED_DIR/logs/conformance-<agent>-<time>/.
# Exits non-zero when a spec failed.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

export BED_DIR=${BED_DIR:-/var/lib/nodelet-bed-conformance} BIN_CACHE AGENT=${AGENT:-nodelet}
FOCUS=${FOCUS:-'\[NodeConformance\]'}
SKIP=${SKIP:-'\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Slow\]'}
PROCS=${PROCS:-4}
SPEC_TIMEOUT=${SPEC_TIMEOUT:-2h}
bed="$here/bed.sh"

build() {
  bash "$here/install-deps.sh"
  bash "$here/build-testbins.sh" all
  bash "$here/build-testbins.sh" e2e
  case $AGENT in
    kubelet) bash "$here/build-testbins.sh" kubelet ;;
    nodelet)
      # NODELET_BIN names a binary to test as it is; without it, bin/nodelet is built from this tree.
      if [ -n "${NODELET_BIN:-}" ]; then
        [ -x "$NODELET_BIN" ] || die "NODELET_BIN=$NODELET_BIN is not an executable"
      else
        export NODELET_BIN=$REPO_ROOT/bin/nodelet
        (cd "$REPO_ROOT" && CGO_ENABLED=0 go build -trimpath -o "$NODELET_BIN" .) || die "go build of nodelet failed"
      fi ;;
    *) die "AGENT=$AGENT: want nodelet or kubelet" ;;
  esac
  (cd "$REPO_ROOT" && go build -o "$E2E_BIN_DIR/conformance-report" ./hack/conformance-report) ||
    die "go build ./hack/conformance-report failed"
}

teardown() {
  local rc=$?
  if [ "${KEEP_BED:-}" = 1 ]; then
    log "KEEP_BED=1: bed left up in $BED_DIR (stop it with: BED_DIR=$BED_DIR AGENT=$AGENT $bed down)"
  else
    bash "$bed" down || log "warning: bed.sh down failed"
  fi
  exit "$rc"
}

main() {
  build
  # A bed left running by an earlier run (KEEP_BED=1) may run another agent: start from a stopped one.
  bash "$bed" down >/dev/null 2>&1 || true
  # Images pulled by an earlier run may be older builds of the test images under the same tags: start the
  # runtime with an empty store, so every image comes from this run's registry.
  rm -rf "${BED_DIR:?}/containerd/root"
  trap teardown EXIT
  bash "$bed" up
  local out rc=0
  out="$BED_DIR/logs/conformance-$AGENT-containerd${CONTAINERD:-1}-$(date +%Y%m%d-%H%M%S)"
  mkdir -p "$out"
  log "running upstream e2e ($KUBE_VERSION) with $AGENT on containerd ${CONTAINERD:-1}: focus '$FOCUS', skip '$SKIP', $PROCS processes; reports in $out"
  "$E2E_BIN_DIR/ginkgo" --procs="$PROCS" --focus="$FOCUS" --skip="$SKIP" --timeout="$SPEC_TIMEOUT" --no-color \
    --output-dir="$out" --json-report=report.json --junit-report=junit.xml --silence-skips \
    "$E2E_BIN_DIR/e2e.test" -- --kubeconfig="$BED_DIR/pki/admin.kubeconfig" --provider=skeleton \
    --kubectl-path="$KUBE_BIN_DIR/kubectl" --report-dir="$out" > "$out/ginkgo.log" 2>&1 || rc=$?
  log "ginkgo exited $rc (log: $out/ginkgo.log)"
  [ -s "$out/report.json" ] || { tail -n 50 "$out/ginkgo.log" >&2; die "no report written"; }
  "$E2E_BIN_DIR/conformance-report" -list-passed "$out/passed.txt" "$out/report.json"
}

main "$@"
