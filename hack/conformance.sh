#!/usr/bin/env bash
# Upstream conformance: runs the Kubernetes project's own e2e specs (e2e.test of KUBE_VERSION, built from the Go
# module proxy) against a bed of its own whose node agent is nodelet, or with AGENT=kubelet the real kubelet of the
# same version on the same bed, for comparison. Builds what it needs first (e2e.test, ginkgo, the e2e test images'
# binaries, the storage images for SUITE=storage; the kubelet when asked), serves the upstream test images from the
# bed's registry under their registry.k8s.io names, and tears the bed down afterwards (KEEP_BED=1 keeps it).
#
# Suites (SUITE):
#   node     [NodeConformance] (the default).
#   sig-node every [sig-node] spec but the alpha and off-by-default ones (Alpha, Feature:OffByDefault): in-place
#            resize, security contexts, runtime classes, pod-level resources and the rest beyond
#            [NodeConformance].
#   storage  [sig-storage] specs that need no cloud: the in-tree hostPath, hostPathSymlink, emptydir and local
#            drivers, PersistentVolumes-local, and the CSI hostpath driver and CSI mock (CSI=0 leaves those two
#            out). It runs on a bed whose cgroup driver is systemd (hack/systemd.sh: PID 1 of the bed is systemd,
#            whose mount namespace the specs' hostPID pods enter with nsenter) and whose agent root is
#            /var/lib/kubelet (the upstream CSI manifests hard-code it); the root starts empty.
# Both skip [Serial], [Disruptive], [Flaky] and [Slow], and storage also Feature: specs and STORAGE_UNBUILDABLE.
# SERIAL=1 runs the suite's [Serial] specs instead, one at a time. SYSTEMD_BED=1 runs any suite on the systemd bed
# (the specs that enter the node's mount namespace with nsenter need it; on the plain bed PID 1 is the machine's).
#
# Settings: SUITE, SERIAL, SYSTEMD_BED, CSI, FOCUS, SKIP (ginkgo regular expressions; they replace the suite's), PROCS
# (parallel ginkgo processes, default 4, 1 with SERIAL=1), AGENT (nodelet|kubelet), CONTAINERD (1|2), SPEC_TIMEOUT
# (ginkgo --timeout, default 2h), GINKGO_ARGS (more ginkgo flags, e.g. --output-interceptor-mode=none), BED_DIR (default /var/lib/nodelet-bed-conformance, -storage for storage).
# Prints one line "conformance: N passed, M failed, K skipped" and the failed specs; the reports (ginkgo JSON and
# JUnit, the passed-spec list, passed and failed specs per group) and every component's log stay under
# $BED_DIR/logs/conformance-<suite>-<agent>-<time>/ (conformance-<agent>-... for the node suite).
# Exits non-zero when a spec failed.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

SUITE=${SUITE:-node}
SERIAL=${SERIAL:-0}
CSI=${CSI:-1}
# What every run skips; a SERIAL=1 run keeps the [Serial] specs.
PARALLEL_SKIP='\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Slow\]'
SERIAL_SKIP='\[Disruptive\]|\[Flaky\]|\[Slow\]'
STORAGE_IN_TREE='\[Driver: (local|hostPath|hostPathSymlink|emptydir)\]|PersistentVolumes-local'
STORAGE_CSI='\[Driver: csi-hostpath\]|CSI Mock|MutableCSINodeAllocatableCount'
# Storage specs no agent can pass on this bed: the volume populator ones deploy hello-populator and
# volume-data-source-validator, whose sources neither the module proxy nor third_party/ has.
STORAGE_UNBUILDABLE='should provision storage with any volume data source'

# suite_focus: the specs of SUITE (before SERIAL).
suite_focus() {
  case $SUITE in
    node) echo '\[NodeConformance\]' ;;
    sig-node) echo '\[sig-node\]' ;;
    storage)
      if [ "$CSI" = 1 ]; then echo "\[sig-storage\].*($STORAGE_IN_TREE|$STORAGE_CSI)"
      else echo "\[sig-storage\].*($STORAGE_IN_TREE)"; fi ;;
    *) die "SUITE=$SUITE: want node, sig-node or storage" ;;
  esac
}

# suite_skip: what the suite leaves out.
suite_skip() {
  local skip=$PARALLEL_SKIP
  [ "$SERIAL" = 1 ] && skip=$SERIAL_SKIP
  [ "$SUITE" = storage ] && skip+="|Feature:|$STORAGE_UNBUILDABLE"
  [ "$SUITE" = sig-node ] && skip+='|Alpha|Feature:OffByDefault'
  echo "$skip"
}

# serial_focus FOCUS: FOCUS's specs that are [Serial] (the tag comes before or after what FOCUS names).
serial_focus() {
  echo "(?:$1).*\[Serial\]|\[Serial\].*(?:$1)"
}

configure() {
  local focus
  focus=$(suite_focus)
  [ "$SERIAL" = 1 ] && focus=$(serial_focus "$focus")
  FOCUS=${FOCUS:-$focus}
  SKIP=${SKIP:-$(suite_skip)}
  if [ "$SERIAL" = 1 ]; then PROCS=${PROCS:-1}; else PROCS=${PROCS:-4}; fi
  SPEC_TIMEOUT=${SPEC_TIMEOUT:-2h}
  export AGENT=${AGENT:-nodelet} BIN_CACHE
  # The upstream specs find the node agent's process with `pidof kubelet` (its mount and user namespaces): nodelet
  # runs under that name, as on a node where it is installed as the kubelet's binary.
  export AGENT_NAME=${AGENT_NAME:-kubelet}
  if [ "$SUITE" = storage ] || [ "${SYSTEMD_BED:-0}" = 1 ]; then
    local dir=/var/lib/nodelet-bed-conformance-systemd
    [ "$SUITE" = storage ] && dir=/var/lib/nodelet-bed-conformance-storage
    export BED_DIR=${BED_DIR:-$dir} CGROUP_DRIVER=systemd AGENT_ROOT=/var/lib/kubelet
    # The bed's systemd (hack/systemd.sh) of its own: a `systemd.sh run` or `down` elsewhere stops only its own.
    export SYSTEMD_DIR=${SYSTEMD_DIR:-$BED_DIR/systemd}
  else
    export BED_DIR=${BED_DIR:-/var/lib/nodelet-bed-conformance}
  fi
}

bed="$here/bed.sh"

build() {
  bash "$here/install-deps.sh"
  bash "$here/build-testbins.sh" all
  bash "$here/build-testbins.sh" e2e
  # The CSI hostpath driver, its sidecars and the mock's images (the registry serves them once built).
  if [ "$SUITE" = storage ] && [ "$CSI" = 1 ]; then bash "$here/build-testbins.sh" csi; fi
  case $AGENT in
    kubelet) bash "$here/build-testbins.sh" kubelet ;;
    nodelet)
      # NODELET_BIN names a binary to test as it is; without it, bin/nodelet is built from this tree.
      if [ -n "${NODELET_BIN:-}" ]; then
        [ -x "$NODELET_BIN" ] || die "NODELET_BIN=$NODELET_BIN is not an executable"
        # The systemd bed runs in a mount namespace of its own whose /tmp and /run are not the host's; only
        # this checkout is put back in its /tmp (hack/systemd.sh).
        local real; real=$(realpath "$NODELET_BIN")
        if [ "${CGROUP_DRIVER:-}" = systemd ] && [[ $real == /tmp/* || $real == /run/* ]] && [[ $real != "$(realpath "$REPO_ROOT")"/* ]]; then
          die "NODELET_BIN=$NODELET_BIN: the systemd bed has its own /tmp and /run; put the binary in this checkout or outside both"
        fi
      else
        export NODELET_BIN=$REPO_ROOT/bin/nodelet
        go_build_nodelet "$NODELET_BIN" || die "go build of nodelet failed"
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

# empty_agent_root: an AGENT_ROOT outside the bed starts empty, as the image store does: what an earlier bed left
# there (pod folders, plugin registrations, the CPU and memory managers' state of the other agent) would be this
# run's input. Run after bed.sh down, which unmounts what it left mounted; a mount still there is an error.
empty_agent_root() {
  [ -n "${AGENT_ROOT:-}" ] && [ -d "$AGENT_ROOT" ] || return 0
  if awk -v d="$AGENT_ROOT" '$2 == d || index($2, d "/") == 1 { found = 1 } END { exit !found }' /proc/mounts; then
    die "something is still mounted under $AGENT_ROOT (grep $AGENT_ROOT /proc/mounts): unmount it first"
  fi
  find "$AGENT_ROOT" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
}

# check_host_mounts: the storage specs set volumes up from a hostPID pod with the host's / at /rootfs, entering the
# mount namespace of the node's PID 1 (test/e2e/storage/utils/host_exec.go); on a host where that namespace cannot be
# opened every local volume spec would fail. The same pod here, once, before the suite: PID 1 must answer.
check_host_mounts() {
  local kubectl=("$KUBE_BIN_DIR/kubectl" --kubeconfig "$BED_DIR/pki/admin.kubeconfig") phase="" i out
  # A new cluster has no service account for the pod until the controller manager makes it.
  for i in $(seq 1 60); do
    "${kubectl[@]}" -n default get serviceaccount default >/dev/null 2>&1 && break
    sleep 1
  done
  "${kubectl[@]}" apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: conformance-host-mounts, namespace: default}
spec:
  hostPID: true
  hostNetwork: true
  restartPolicy: Never
  automountServiceAccountToken: false
  containers:
  - name: nsenter
    image: registry.k8s.io/e2e-test-images/agnhost:2.66.1
    command: [nsenter, --mount=/rootfs/proc/1/ns/mnt, --, sh, -c, 'cat /proc/1/comm']
    securityContext: {privileged: true}
    volumeMounts: [{name: rootfs, mountPath: /rootfs}]
  volumes: [{name: rootfs, hostPath: {path: /}}]
YAML
  for i in $(seq 1 120); do
    phase=$("${kubectl[@]}" -n default get pod conformance-host-mounts -o jsonpath='{.status.phase}' 2>/dev/null || true)
    [ "$phase" = Succeeded ] || [ "$phase" = Failed ] && break
    sleep 1
  done
  out=$("${kubectl[@]}" -n default logs conformance-host-mounts 2>&1 || true)
  "${kubectl[@]}" -n default delete pod conformance-host-mounts --wait=false >/dev/null 2>&1 || true
  [ "$phase" = Succeeded ] ||
    die "a hostPID pod cannot enter the mount namespace of the node's PID 1 (pod $phase after ${i}s: $out)"
  log "a hostPID pod enters the mount namespace of the node's PID 1 ($out)"
}

# out_dir: this run's report folder under the bed's logs.
out_dir() {
  local name=conformance
  [ "$SUITE" = node ] || name+=-$SUITE
  [ "$SERIAL" = 1 ] && name+=-serial
  echo "$BED_DIR/logs/$name-$AGENT-containerd${CONTAINERD:-1}-$(date +%Y%m%d-%H%M%S)"
}

main() {
  configure
  build
  # A bed left running by an earlier run (KEEP_BED=1) may run another agent: start from a stopped one.
  bash "$bed" down >/dev/null 2>&1 || true
  # Images pulled by an earlier run may be older builds of the test images under the same tags: start the
  # runtime with an empty store, so every image comes from this run's registry.
  rm -rf "${BED_DIR:?}/containerd/root"
  # The cluster starts empty too: what an interrupted earlier run left in etcd (namespaces whose pods, CSI drivers
  # and claims would come back) is not this run's input.
  rm -rf "${BED_DIR:?}/etcd"
  empty_agent_root
  trap teardown EXIT
  bash "$bed" up
  [ "${CGROUP_DRIVER:-}" != systemd ] || check_host_mounts
  local out rc=0 t0=$SECONDS
  out=$(out_dir)
  mkdir -p "$out"
  log "running upstream e2e ($KUBE_VERSION, suite $SUITE$([ "$SERIAL" = 1 ] && echo ' [Serial]')) with $AGENT on containerd ${CONTAINERD:-1}, cgroup driver ${CGROUP_DRIVER:-cgroupfs}: focus '$FOCUS', skip '$SKIP', $PROCS processes; reports in $out"
  # shellcheck disable=SC2086 # GINKGO_ARGS are words to add
  "$E2E_BIN_DIR/ginkgo" --procs="$PROCS" --focus="$FOCUS" --skip="$SKIP" --timeout="$SPEC_TIMEOUT" --no-color ${GINKGO_ARGS:-} \
    --output-dir="$out" --json-report=report.json --junit-report=junit.xml --silence-skips \
    "$E2E_BIN_DIR/e2e.test" -- --kubeconfig="$BED_DIR/pki/admin.kubeconfig" --provider=skeleton \
    --kubectl-path="$KUBE_BIN_DIR/kubectl" --report-dir="$out" ${AGENT_ROOT:+--kubelet-root-dir="$AGENT_ROOT"} \
    > "$out/ginkgo.log" 2>&1 || rc=$?
  log "ginkgo exited $rc after $(((SECONDS - t0) / 60)) min (log: $out/ginkgo.log)"
  save_metric_families "$out/metric-families.txt"
  [ -s "$out/report.json" ] || { tail -n 50 "$out/ginkgo.log" >&2; die "no report written"; }
  "$E2E_BIN_DIR/conformance-report" -groups "$out/groups.txt" "$out/report.json" >/dev/null || true
  "$E2E_BIN_DIR/conformance-report" -list-passed "$out/passed.txt" "$out/report.json"
}

# save_metric_families FILE: the metric families the agent serves after the run, one "endpoint family type" line
# each (its /metrics, /metrics/cadvisor, /metrics/probes and /metrics/resource, read through the API server's node
# proxy), sorted: `comm` of two runs' files (one per agent) lists what one serves and the other does not.
save_metric_families() {
  local kubectl=("$KUBE_BIN_DIR/kubectl" --kubeconfig "$BED_DIR/pki/admin.kubeconfig") node ep
  node=$("${kubectl[@]}" get nodes -o jsonpath='{.items[0].metadata.name}' 2>/dev/null) || return 0
  for ep in metrics metrics/cadvisor metrics/probes metrics/resource; do
    "${kubectl[@]}" get --raw "/api/v1/nodes/$node/proxy/$ep" 2>/dev/null |
      awk -v ep="/$ep" '$1 == "#" && $2 == "TYPE" {print ep, $3, $4}' || true
  done | sort -u > "$1"
}

main "$@"
