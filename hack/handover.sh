#!/usr/bin/env bash
# Handover check (issue 12): a node run by the real kubelet v1.37.1 with --lock-file/--exit-on-lock-contention is
# taken over by nodelet started with the same flags, config, kubeconfig and root dir, then handed back. Prints,
# for every container of the pods created under the kubelet (one crash-looping, one static), whether its ID and
# restart count survived each handover, and the handover time (kubelet exit → node Ready with nodelet).
# Uses a bed of its own (BED_DIR default /var/lib/nodelet-bed-handover) and tears it down (KEEP_BED=1 keeps it).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

export BED_DIR=${BED_DIR:-/var/lib/nodelet-bed-handover} BIN_CACHE AGENT=kubelet
bed="$here/bed.sh"
LOCK=$BED_DIR/run/kubelet.lock
export NODELET_EXTRA_ARGS="--lock-file $LOCK --exit-on-lock-contention"
NODELET_BIN=${NODELET_BIN:-$REPO_ROOT/bin/nodelet}
K() { "$KUBE_BIN_DIR/kubectl" --kubeconfig "$BED_DIR/pki/admin.kubeconfig" "$@"; }

# snapshot: one line per container of the e2e pods: pod/container id restartCount.
snapshot() {
  K get pods -n handover -o jsonpath='{range .items[*]}{range .status.containerStatuses[*]}{.name}{" "}{.containerID}{" "}{.restartCount}{"\n"}{end}{end}' | sort
  K get pods -n kube-system -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.metadata.uid}{" "}{range .status.containerStatuses[*]}{.containerID}{" "}{.restartCount}{end}{"\n"}{end}' | grep static || true
}

node_version() { K get node -o jsonpath='{.items[0].status.nodeInfo.kubeletVersion}'; }

# wait_ready_with nodelet|kubelet: the node is Ready and reports that agent's version.
wait_ready_with() {
  local want=$1 start=$SECONDS
  until [ "$(K get node -o jsonpath='{.items[0].status.conditions[?(@.type=="Ready")].status}')" = True ] &&
    { if [ "$want" = nodelet ]; then node_version | grep -q nodelet; else ! node_version | grep -q nodelet; fi; }; do
    [ $((SECONDS - start)) -gt 120 ] && die "node not Ready with $want after 120 s"
    sleep 0.2
  done
}

teardown() {
  local rc=$?
  [ -n "${NODELET_PID:-}" ] && kill "$NODELET_PID" 2>/dev/null || true
  if [ "${KEEP_BED:-}" != 1 ]; then bash "$bed" down || true; fi
  exit "$rc"
}

main() {
  [ -x "$NODELET_BIN" ] || die "build nodelet first (make build) or set NODELET_BIN"
  bash "$bed" clean >/dev/null 2>&1 || true # a bed of its own: start from nothing
  trap teardown EXIT
  bash "$bed" up
  mkdir -p "$BED_DIR/manifests"
  cat > "$BED_DIR/manifests/static.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata: {name: static, namespace: kube-system}
spec:
  containers: [{name: main, image: busybox, command: [sh, -c, "sleep 3600"]}]
YAML
  K create namespace handover
  K apply -n handover -f - <<YAML
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  nodeName: $(K get node -o jsonpath='{.items[0].metadata.name}')
  containers:
  - {name: main, image: busybox, command: [sh, -c, "echo up; sleep 3600"], readinessProbe: {exec: {command: ["true"]}, periodSeconds: 2}}
  - {name: side, image: busybox, command: [sh, -c, "sleep 3600"]}
---
apiVersion: v1
kind: Pod
metadata: {name: crash}
spec:
  nodeName: $(K get node -o jsonpath='{.items[0].metadata.name}')
  containers:
  restartPolicy: OnFailure
  volumes: [{name: d, emptyDir: {}}]
  containers:
  - name: main
    image: busybox
    command: [sh, -c, "if [ -f /d/crashed ]; then sleep 3600; else touch /d/crashed; sleep 2; exit 1; fi"]
    volumeMounts: [{name: d, mountPath: /d}]
YAML
  log "waiting for the pods to run and the crashing one to restart once under the kubelet"
  local start=$SECONDS
  until K get pod -n handover crash -o jsonpath='{.status.containerStatuses[0].restartCount}' | grep -q '^[1-9]' &&
    [ "$(K get pod -n handover web -o jsonpath='{.status.phase}')" = Running ] &&
    K get pods -n kube-system | grep -q 'static.*Running'; do
    [ $((SECONDS - start)) -gt 180 ] && die "pods not ready under the kubelet"
    sleep 1
  done
  # Between two crashes: the crashing container is in back-off, its restart count steady for a while.
  snapshot > "$BED_DIR/before.txt"
  log "under the kubelet ($(node_version)):"; cat "$BED_DIR/before.txt"

  local kubelet_pid; kubelet_pid=$(cat "$BED_DIR/pids/nodelet.pid")
  # The kubelet's own command line, as the DaemonSet reads it through hostPID: nodelet gets the same flags.
  local -a args; mapfile -d '' -t args < "/proc/$kubelet_pid/cmdline"
  log "starting nodelet with the kubelet's flags: ${args[*]:1}"
  local t0=$SECONDS
  "$NODELET_BIN" "${args[@]:1}" > "$BED_DIR/logs/nodelet-handover.log" 2>&1 &
  NODELET_PID=$!
  local n=0; while kill -0 "$kubelet_pid" 2>/dev/null; do sleep 0.1; n=$((n + 1)); [ $n -gt 600 ] && die "the kubelet did not exit"; done
  local t_exit=$SECONDS
  wait_ready_with nodelet
  log "HANDOVER kubelet→nodelet: kubelet exited after $((t_exit - t0)) s, node Ready with nodelet $((SECONDS - t_exit)) s later"
  sleep 15 # let nodelet sync every pod a few times
  snapshot > "$BED_DIR/after-nodelet.txt"
  log "under nodelet ($(node_version)):"; cat "$BED_DIR/after-nodelet.txt"
  diff "$BED_DIR/before.txt" "$BED_DIR/after-nodelet.txt" && log "RESULT kubelet→nodelet: no container restarted" ||
    log "RESULT kubelet→nodelet: containers differ (above)"

  log "handing back: starting the kubelet again, as its supervisor would (same command line)"
  # Not through bed.sh start, which refuses while nodelet holds port 10250: the kubelet waits in flock.
  setsid "${args[@]}" >> "$BED_DIR/logs/nodelet.log" 2>&1 < /dev/null &
  echo $! > "$BED_DIR/pids/nodelet.pid"
  local t1=$SECONDS
  wait "$NODELET_PID" || true; NODELET_PID=
  local t_exit2=$SECONDS
  wait_ready_with kubelet
  log "HANDOVER nodelet→kubelet: nodelet exited after $((t_exit2 - t1)) s, node Ready with the kubelet $((SECONDS - t_exit2)) s later"
  sleep 15
  snapshot > "$BED_DIR/after-kubelet.txt"
  log "back under the kubelet ($(node_version)):"; cat "$BED_DIR/after-kubelet.txt"
  diff "$BED_DIR/after-nodelet.txt" "$BED_DIR/after-kubelet.txt" && log "RESULT nodelet→kubelet: no container restarted" ||
    log "RESULT nodelet→kubelet: containers differ (above)"
}

main "$@"
