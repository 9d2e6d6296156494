#!/usr/bin/env bash
# Handover check: a node run by the real kubelet v1.37.1 with --lock-file/--exit-on-lock-contention is
# taken over by nodelet, then handed back. Prints, for every container of the pods created under the kubelet
# (one with probes, one crash-looping with a volume, one static), whether its ID and restart count survived each
# handover, and the handover times (kubelet exit → node Ready with nodelet, and back); exits non-zero when a
# container restarted or a step failed. A pod with a csi-hostpath claim (the CSI hostpath driver deployed from
# upstream's manifests, hack/storage.sh; the agents' root folder is /var/lib/kubelet, as those manifests
# want) keeps its volume and data through the takeover; under nodelet it is deleted (its volume unpublished
# and unstaged, the VolumeAttachment gone) and a new pod mounts the same claim and reads the data.
#   MODE=daemonset (default): as users deploy it. The kubelet runs under a supervisor loop (systemd's
#     Restart=always); the image from hack/image is pushed to the bed's registry and `kubectl apply -k` of an
#     overlay of deploy/ starts the DaemonSet, whose pod runs `nodelet takeover`; a pod's process that calls
#     itself kubelet (argv[0] "kubelet", a kubelet's flags, its own executable at the host kubelet's path)
#     runs beside the real kubelet and the takeover's log must name the real one found and the impostor
#     rejected, at the first takeover and after the rolling update; kubectl logs/exec are tried on
#     the old pods and a new pod must run; a rolling update of the DaemonSet goes through the waiting kubelet to
#     a new nodelet; deleting the DaemonSet hands the node back to the waiting kubelet.
#   MODE=process: nodelet started by hand with the kubelet's command line; handed back by starting the kubelet
#     again (it waits for the lock) and stopping nodelet.
# Uses a bed of its own (BED_DIR default /var/lib/nodelet-bed-handover) and tears it down (KEEP_BED=1 keeps it).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

export BED_DIR=${BED_DIR:-/var/lib/nodelet-bed-handover} BIN_CACHE AGENT=kubelet AGENT_ROOT=/var/lib/kubelet
MODE=${MODE:-daemonset}
bed="$here/bed.sh"
LOCK=$BED_DIR/run/kubelet.lock
export NODELET_EXTRA_ARGS="--lock-file $LOCK --exit-on-lock-contention"
NODELET_BIN=${NODELET_BIN:-$REPO_ROOT/bin/nodelet}
IMAGE=${REGISTRY_ADDR:-127.0.0.1:5050}/nodelet:handover
K() { "$KUBE_BIN_DIR/kubectl" --kubeconfig "$BED_DIR/pki/admin.kubeconfig" "$@"; }
FAILED=0

# snapshot: one line per container of the pods made under the kubelet: name id restartCount; the static pod's
# mirror pod with its UID.
snapshot() {
  K get pods -n handover -o jsonpath='{range .items[*]}{range .status.containerStatuses[*]}{.name}{" "}{.containerID}{" "}{.restartCount}{"\n"}{end}{end}' | sort
  K get pods -n kube-system -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.metadata.uid}{" "}{range .status.containerStatuses[*]}{.containerID}{" "}{.restartCount}{end}{"\n"}{end}' | grep static || true
}

# compare WHAT BEFORE AFTER: the two snapshots must be equal.
compare() {
  if diff "$2" "$3"; then
    log "RESULT $1: no container restarted ($(grep -c . "$3") containers, same IDs and restart counts, same static pod UID)"
  else
    log "RESULT $1: FAILED, containers differ (above)"
    FAILED=1
  fi
}

node_version() { K get node -o jsonpath='{.items[0].status.nodeInfo.kubeletVersion}'; }

# wait_ready_with nodelet|kubelet: the node is Ready and reports that agent's version.
wait_ready_with() {
  local want=$1 start=$SECONDS
  until [ "$(K get node -o jsonpath='{.items[0].status.conditions[?(@.type=="Ready")].status}')" = True ] &&
    { if [ "$want" = nodelet ]; then node_version | grep -q nodelet; else ! node_version | grep -q nodelet; fi; }; do
    [ $((SECONDS - start)) -gt 180 ] && die "node not Ready with $want after 180 s"
    sleep 0.2
  done
}

# wait_gone PID WHAT: waits (up to 180 s) for the process to exit.
wait_gone() {
  local n=0
  while kill -0 "$1" 2>/dev/null; do
    sleep 0.1
    n=$((n + 1))
    if [ $n -gt 1800 ]; then die "$2 did not exit"; fi
  done
}

teardown() {
  local rc=$?
  [ -n "${SUPERVISOR_PID:-}" ] && kill "$SUPERVISOR_PID" 2>/dev/null || true
  [ -n "${LOGKEEPER_PID:-}" ] && { pkill -P "$LOGKEEPER_PID" 2>/dev/null; kill "$LOGKEEPER_PID" 2>/dev/null; } || true
  [ -n "${NODELET_PID:-}" ] && kill "$NODELET_PID" 2>/dev/null || true
  if [ "${KEEP_BED:-}" != 1 ]; then bash "$bed" down || true; fi
  exit "$rc"
}

# data_pod NODE: the pod on the csi-hostpath claim "data"; it writes its note once.
data_pod() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: data}
spec:
  nodeName: $1
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
  containers:
  - name: main
    image: busybox
    command: [sh, -c, "[ -f /data/note ] || echo written-under-the-kubelet > /data/note; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
YAML
}

# start_pods: under the kubelet, a static pod, a pod with two containers and a readiness probe, one that
# crashes once (restart count 1) with an emptyDir volume, a pod on a CSI claim, and the sample device plugin with a
# pod holding one of its devices; waits until they are settled.
start_pods() {
  mkdir -p "$BED_DIR/manifests"
  cat > "$BED_DIR/manifests/static.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata: {name: static, namespace: kube-system}
spec:
  containers: [{name: main, image: busybox, command: [sh, -c, "sleep 3600"]}]
YAML
  local node; node=$(K get node -o jsonpath='{.items[0].metadata.name}')
  K create namespace handover
  K apply -n handover -f - <<YAML
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  nodeName: $node
  containers:
  - {name: main, image: busybox, command: [sh, -c, "echo up; sleep 3600"], readinessProbe: {exec: {command: ["true"]}, periodSeconds: 2}}
  - {name: side, image: busybox, command: [sh, -c, "sleep 3600"]}
---
apiVersion: v1
kind: Pod
metadata: {name: crash}
spec:
  nodeName: $node
  restartPolicy: OnFailure
  volumes: [{name: d, emptyDir: {}}]
  containers:
  - name: main
    image: busybox
    command: [sh, -c, "if [ -f /d/crashed ]; then sleep 3600; else touch /d/crashed; sleep 2; exit 1; fi"]
    volumeMounts: [{name: d, mountPath: /d}]
YAML
  K apply -n handover -f - <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  storageClassName: csi-hostpath-sc
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 16Mi}}
YAML
  data_pod "$node" | K apply -n handover -f -
  device_pods "$node"
  log "waiting for the pods to run and the crashing one to restart once under the kubelet"
  local start=$SECONDS
  until K get pod -n handover crash -o jsonpath='{.status.containerStatuses[0].restartCount}' | grep -q '^[1-9]' &&
    [ "$(K get pod -n handover crash -o jsonpath='{.status.containerStatuses[0].ready}')" = true ] &&
    [ "$(K get pod -n handover web -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ] &&
    [ "$(K get pod -n handover data -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ] &&
    K get pods -n kube-system | grep -q 'static.*Running'; do
    [ $((SECONDS - start)) -gt 180 ] && die "pods not ready under the kubelet"
    sleep 1
  done
}

# device_pods NODE: under the kubelet, the upstream sample device plugin (two devices of example.com/resource)
# and a pod holding one of them.
device_pods() {
  K apply -n handover -f - <<YAML
apiVersion: v1
kind: Pod
metadata: {name: device-plugin}
spec:
  nodeName: $1
  volumes: [{name: dp, hostPath: {path: /var/lib/kubelet/device-plugins, type: Directory}}]
  containers:
  - {name: plugin, image: registry.k8s.io/e2e-test-images/sample-device-plugin:1.7, volumeMounts: [{name: dp, mountPath: /var/lib/kubelet/device-plugins}]}
YAML
  local start=$SECONDS
  until [ "$(K get node "$1" -o jsonpath='{.status.allocatable.example\.com/resource}')" = 2 ]; do
    [ $((SECONDS - start)) -gt 120 ] && die "the sample device plugin's devices are not on the Node under the kubelet"
    sleep 1
  done
  device_pod device "$1" | K apply -n handover -f -
  K wait -n handover pod/device --for=condition=Ready --timeout=60s >/dev/null || die "the device pod is not Ready under the kubelet"
}

# device_pod NAME NODE: a pod asking for one sample device, printing the device it was given.
device_pod() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  nodeName: $2
  containers:
  - {name: main, image: busybox, command: [sh, -c, "ls -d /tmp/Dev-*; sleep 3600"], resources: {limits: {example.com/resource: 1}}}
YAML
}

# devices_under_nodelet: the device plugin registers with nodelet (its devices back on the Node), and a new pod
# asking for a device gets the one the kubelet did not give (nodelet read the kubelet's checkpoint).
devices_under_nodelet() {
  local node start=$SECONDS held got
  node=$(K get node -o jsonpath='{.items[0].metadata.name}')
  until [ "$(K get node "$node" -o jsonpath='{.status.allocatable.example\.com/resource}')" = 2 ]; do
    [ $((SECONDS - start)) -gt 90 ] && break
    sleep 1
  done
  held=$(K logs -n handover device)
  device_pod device2 "$node" | K apply -n handover-new -f - >/dev/null
  if K wait -n handover-new pod/device2 --for=condition=Ready --timeout=60s >/dev/null; then
    got=$(K logs -n handover-new device2)
  fi
  if [ -n "${got:-}" ] && [ "$got" != "$held" ]; then
    log "RESULT device plugin under nodelet: registered again ($((SECONDS - start)) s), the kubelet's pod keeps $held, a new pod gets $got"
  else
    log "RESULT device plugin under nodelet: FAILED (the kubelet's pod holds ${held:-?}, the new pod got ${got:-nothing})"; FAILED=1
  fi
}

# start_impostor: a pod whose process calls itself kubelet, beside the real one (the takeover must not take it
# for the kubelet): argv[0] "kubelet" and a kubelet's flags, its executable a file of its container at the path
# of the host's kubelet, in the pods' cgroup tree and its own mount namespace. busybox's own `exec -a kubelet
# sleep 3600` cannot be that process (busybox picks its applet by argv[0]: "kubelet: applet not found"), so
# the container runs a copy of the bed's static pause binary (mounted from the host), which sleeps whatever
# its name. Sets IMPOSTOR_PID (its PID on the host).
start_impostor() {
  local kubelet_exe node
  kubelet_exe=$(readlink "/proc/$(cat "$BED_DIR/pids/nodelet.pid")/exe")
  node=$(K get node -o jsonpath='{.items[0].metadata.name}')
  K apply -n handover -f - <<YAML
apiVersion: v1
kind: Pod
metadata: {name: impostor}
spec:
  nodeName: $node
  volumes: [{name: sleeper, hostPath: {path: $(readlink -f "$BED_DIR/bin/pause"), type: File}}]
  containers:
  - name: main
    image: busybox
    command:
    - sh
    - -c
    - mkdir -p "\$(dirname "\$0")" && cp /sleeper "\$0" && exec -a kubelet "\$0" --config=/impostor.yaml --lock-file=$LOCK --exit-on-lock-contention
    - $kubelet_exe
    volumeMounts: [{name: sleeper, mountPath: /sleeper, readOnly: true}]
YAML
  K wait -n handover pod/impostor --for=condition=Ready --timeout=60s >/dev/null || die "the impostor pod did not start"
  local p start=$SECONDS
  until [ -n "${IMPOSTOR_PID:-}" ]; do
    for p in /proc/[0-9]*; do
      [ "$(tr '\0' '\n' < "$p/cmdline" 2>/dev/null | head -1)" = kubelet ] && IMPOSTOR_PID=${p#/proc/}
    done
    [ $((SECONDS - start)) -gt 30 ] && die "no process with argv[0] kubelet in the impostor pod"
    sleep 0.5
  done
  log "an impostor runs beside the kubelet: pid $IMPOSTOR_PID: $(tr '\0' ' ' < "/proc/$IMPOSTOR_PID/cmdline"), exe $(readlink "/proc/$IMPOSTOR_PID/exe") in its container"
}

# check_identified WHAT PIDS...: the takeover pod's log names one of PIDS (the real kubelet) as the kubelet found,
# and the impostor as rejected.
check_identified() {
  local what=$1 logs found p; shift
  logs=$(K logs -n nodelet-system daemonset/nodelet 2>&1 || true)
  found=$(grep "Found the host's kubelet" <<<"$logs" | grep -o '"pid":[0-9]*' | head -1 | cut -d: -f2 || true)
  grep '"logger":"takeover"' <<<"$logs" >&2 || true # both stages: before nsenter and in the host's mount namespace
  for p in "$@"; do
    if [ -n "$found" ] && [ "$found" = "$p" ] &&
      grep "Rejected a process named kubelet" <<<"$logs" | grep -q "\"pid\":$IMPOSTOR_PID[,}]"; then
      log "RESULT $what: the takeover found the real kubelet (pid $found) and rejected the impostor (pid $IMPOSTOR_PID)"
      return
    fi
  done
  log "RESULT $what: FAILED, the takeover found pid ${found:-none} (the kubelet: $*; the impostor, to be rejected: $IMPOSTOR_PID)"
  FAILED=1
}

# supervise PID ARGS...: a supervisor loop as systemd's Restart=always (RestartSec=1): whenever the agent
# process exits, the same command line starts again (the kubelet then waits for the lock).
supervise() {
  local pid=$1; shift
  while :; do
    while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    sleep 1
    setsid "$@" >> "$BED_DIR/logs/nodelet.log" 2>&1 < /dev/null &
    pid=$!
    echo "$pid" > "$BED_DIR/pids/nodelet.pid"
    echo "$(date +%T) supervisor: started the kubelet again (pid $pid)" >> "$BED_DIR/logs/supervisor.log"
  done
}

# checks_under_nodelet: kubectl logs and exec reach the old pods through nodelet's node API, and a new pod runs.
checks_under_nodelet() {
  if K logs -n handover web -c main | grep -q '^up$' && [ "$(K exec -n handover web -c main -- echo ok)" = ok ]; then
    log "RESULT kubectl logs/exec on a pod started by the kubelet: ok"
  else
    log "RESULT kubectl logs/exec on a pod started by the kubelet: FAILED"; FAILED=1
  fi
  K create namespace handover-new >/dev/null
  K apply -n handover-new -f - <<YAML
apiVersion: v1
kind: Pod
metadata: {name: fresh}
spec:
  nodeName: $(K get node -o jsonpath='{.items[0].metadata.name}')
  containers: [{name: main, image: busybox, command: [sh, -c, "sleep 3600"]}]
YAML
  if K wait -n handover-new pod/fresh --for=condition=Ready --timeout=60s >/dev/null; then
    log "RESULT a new pod under nodelet: Running"
  else
    log "RESULT a new pod under nodelet: FAILED"; FAILED=1
  fi
}

# csi_under_nodelet: the claim's data written under the kubelet is there; the pod is deleted under nodelet:
# its volume unpublished and unstaged (nothing of it left mounted or on disk), out of volumesInUse, its
# VolumeAttachment gone; a new pod mounts the same claim and reads the data. The snapshot is taken again.
csi_under_nodelet() {
  local uid pv handle sha node
  if [ "$(K exec -n handover data -- cat /data/note)" = written-under-the-kubelet ]; then
    log "RESULT the csi-hostpath volume mounted under the kubelet serves its data under nodelet: ok"
  else
    log "RESULT the csi-hostpath volume's data under nodelet: FAILED"; FAILED=1
  fi
  uid=$(K get pod -n handover data -o jsonpath='{.metadata.uid}')
  pv=$(K get pvc -n handover data -o jsonpath='{.spec.volumeName}')
  handle=$(K get pv "$pv" -o jsonpath='{.spec.csi.volumeHandle}')
  node=$(K get node -o jsonpath='{.items[0].metadata.name}')
  sha=$(printf %s "$handle" | sha256sum | cut -d' ' -f1)
  K delete pod -n handover data --wait=true --timeout=120s >/dev/null
  local start=$SECONDS left=""
  while :; do
    left=""
    grep -q "/var/lib/kubelet/pods/$uid/" /proc/self/mountinfo && left+=" pod-mounts"
    [ -e "/var/lib/kubelet/plugins/kubernetes.io/csi/hostpath.csi.k8s.io/$sha" ] && left+=" staging"
    K get node "$node" -o jsonpath='{.status.volumesInUse}' | grep -q "$handle" && left+=" volumesInUse"
    K get volumeattachment "csi-$(printf %s "$handle""hostpath.csi.k8s.io""$node" | sha256sum | cut -d' ' -f1)" >/dev/null 2>&1 && left+=" VolumeAttachment"
    [ -z "$left" ] && break
    [ $((SECONDS - start)) -gt 120 ] && break
    sleep 1
  done
  if [ -z "$left" ]; then
    log "RESULT the csi-hostpath pod deleted under nodelet: unpublished, unstaged, out of volumesInUse, detached ($((SECONDS - start)) s)"
  else
    log "RESULT the csi-hostpath pod deleted under nodelet: FAILED, left:$left"; FAILED=1
  fi
  data_pod "$node" | K apply -n handover -f -
  if K wait -n handover pod/data --for=condition=Ready --timeout=120s >/dev/null &&
    [ "$(K exec -n handover data -- cat /data/note)" = written-under-the-kubelet ]; then
    log "RESULT a new pod on the same claim under nodelet: Running with the data"
  else
    log "RESULT a new pod on the same claim under nodelet: FAILED"; FAILED=1
  fi
  snapshot > "$BED_DIR/after-nodelet.txt"
}

# rollout: a rolling update of the DaemonSet (maxUnavailable 1): the old pod's nodelet stops its own pod and
# exits, the waiting kubelet holds the node while it starts the new pod, whose nodelet takes it over again.
# No other container may restart.
rollout() {
  local old_pid; old_pid=$(pgrep -f 'nodelet takeover --in-host' | head -1 || true)
  log "rolling update of the DaemonSet (kubectl rollout restart)"
  local t0=$SECONDS
  K -n nodelet-system rollout restart daemonset/nodelet
  [ -n "$old_pid" ] && wait_gone "$old_pid" "the old nodelet"
  if K -n nodelet-system rollout status daemonset/nodelet --timeout=180s >/dev/null; then
    wait_ready_with nodelet
    log "ROLLOUT: the new nodelet runs the node $((SECONDS - t0)) s after the rollout began"
    # The kubelet it took over from is one its supervisor started again.
    mapfile -t restarted < <(grep -o 'started the kubelet again (pid [0-9]*' "$BED_DIR/logs/supervisor.log" | grep -o '[0-9]*$')
    check_identified "rolling update beside an impostor" "${restarted[@]}"
    sleep 10
    snapshot > "$BED_DIR/after-rollout.txt"
    compare "rolling update nodelet→kubelet→nodelet" "$BED_DIR/after-nodelet.txt" "$BED_DIR/after-rollout.txt"
  else
    log "RESULT rolling update: FAILED (the new pod did not become ready)"; FAILED=1
  fi
}

# keep_ds_logs: follows the log file of every container of a nodelet-system pod into $BED_DIR/logs/ds-*.log, so
# what the DaemonSet's nodelet did is kept after its pod (and with it the file) is gone.
keep_ds_logs() {
  local -A followed=()
  local f name
  while :; do
    for f in "$BED_DIR"/logs/pods/nodelet-system_*/*/*.log; do
      [ -e "$f" ] && [ -z "${followed[$f]:-}" ] || continue
      followed[$f]=1
      name=${f#"$BED_DIR"/logs/pods/nodelet-system_}
      name=${name//\//_}
      tail -n +1 -F "$f" >> "$BED_DIR/logs/ds-$name" 2>/dev/null &
    done
    sleep 0.5
  done
}

# daemonset: the kubelet under a supervisor; nodelet's image in the bed's registry; `kubectl apply -k` of an
# overlay of deploy/ (the image, and the binary's copy kept under the bed); then delete it to hand back.
daemonset() {
  local kubelet_pid; kubelet_pid=$(cat "$BED_DIR/pids/nodelet.pid")
  local -a args; mapfile -d '' -t args < "/proc/$kubelet_pid/cmdline"
  supervise "$kubelet_pid" "${args[@]}" &
  SUPERVISOR_PID=$!
  keep_ds_logs &
  LOGKEEPER_PID=$!
  log "pushing nodelet's image to the bed's registry as $IMAGE"
  (cd "$REPO_ROOT" && go run ./hack/image -bin "linux/$(go env GOARCH)=$NODELET_BIN" -version handover -push "$IMAGE" \
    -digest-file "$BED_DIR/image.digest")
  local digest; digest=$(cat "$BED_DIR/image.digest")
  local overlay=$BED_DIR/deploy-overlay
  mkdir -p "$overlay"
  cat > "$overlay/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(realpath --relative-to="$overlay" "$REPO_ROOT/deploy")
images:
- {name: ghcr.io/nodelet/nodelet, newName: ${IMAGE%:*}, digest: $digest}
patches:
- target: {kind: DaemonSet, name: nodelet}
  patch: |
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --bin-dir=$BED_DIR/takeover-bin
YAML
  log "kubectl apply -k (deploy/ with the bed's image, pinned by digest)"
  local t0=$SECONDS
  K apply -k "$overlay"
  local ds_image; ds_image=$(K get -n nodelet-system daemonset/nodelet -o jsonpath='{.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].imagePullPolicy}')
  if [ "$ds_image" = "${IMAGE%:*}@$digest Always" ]; then
    log "RESULT the DaemonSet runs the pushed image by digest, pulled Always: $ds_image"
  else
    log "RESULT the DaemonSet's image is not the pushed digest pulled Always: $ds_image (want ${IMAGE%:*}@$digest Always)"; FAILED=1
  fi
  wait_gone "$kubelet_pid" "the kubelet"
  local t_exit=$SECONDS
  wait_ready_with nodelet
  log "HANDOVER kubelet→nodelet: kubelet exited $((t_exit - t0)) s after kubectl apply, node Ready with nodelet $((SECONDS - t_exit)) s later"
  check_identified "kubelet→nodelet beside an impostor" "$kubelet_pid"
  sleep 15 # nodelet syncs every pod a few times
  snapshot > "$BED_DIR/after-nodelet.txt"
  log "under nodelet ($(node_version)):"; cat "$BED_DIR/after-nodelet.txt"
  compare kubelet→nodelet "$BED_DIR/before.txt" "$BED_DIR/after-nodelet.txt"
  checks_under_nodelet
  devices_under_nodelet
  rollout
  csi_under_nodelet

  log "handing back: deleting the DaemonSet (the kubelet, restarted by its supervisor, waits for the lock)"
  local nodelet_pid; nodelet_pid=$(pgrep -f 'nodelet takeover --in-host' | head -1 || true)
  local t1=$SECONDS
  K delete -k "$overlay" --wait=false
  [ -n "$nodelet_pid" ] && wait_gone "$nodelet_pid" nodelet
  local t_exit2=$SECONDS
  wait_ready_with kubelet
  log "HANDOVER nodelet→kubelet: nodelet exited $((t_exit2 - t1)) s after kubectl delete, node Ready with the kubelet $((SECONDS - t_exit2)) s later"
  K wait namespace nodelet-system --for=delete --timeout=120s >/dev/null || { log "RESULT the DaemonSet's namespace is not gone"; FAILED=1; }
}

# process: nodelet started by hand with the kubelet's command line, handed back by starting the kubelet again
# and stopping nodelet.
process() {
  [ -x "$NODELET_BIN" ] || die "build nodelet first (make build) or set NODELET_BIN"
  local kubelet_pid; kubelet_pid=$(cat "$BED_DIR/pids/nodelet.pid")
  local -a args; mapfile -d '' -t args < "/proc/$kubelet_pid/cmdline"
  log "starting nodelet with the kubelet's flags: ${args[*]:1}"
  local t0=$SECONDS
  "$NODELET_BIN" "${args[@]:1}" > "$BED_DIR/logs/nodelet-handover.log" 2>&1 &
  NODELET_PID=$!
  wait_gone "$kubelet_pid" "the kubelet"
  local t_exit=$SECONDS
  wait_ready_with nodelet
  log "HANDOVER kubelet→nodelet: kubelet exited after $((t_exit - t0)) s, node Ready with nodelet $((SECONDS - t_exit)) s later"
  sleep 15
  snapshot > "$BED_DIR/after-nodelet.txt"
  log "under nodelet ($(node_version)):"; cat "$BED_DIR/after-nodelet.txt"
  compare kubelet→nodelet "$BED_DIR/before.txt" "$BED_DIR/after-nodelet.txt"

  log "handing back: starting the kubelet again, as its supervisor would (same command line)"
  # Not through bed.sh start, which refuses while nodelet holds port 10250: the kubelet waits in flock.
  setsid "${args[@]}" >> "$BED_DIR/logs/nodelet.log" 2>&1 < /dev/null &
  echo $! > "$BED_DIR/pids/nodelet.pid"
  local t1=$SECONDS
  wait "$NODELET_PID" || true; NODELET_PID=
  local t_exit2=$SECONDS
  wait_ready_with kubelet
  log "HANDOVER nodelet→kubelet: nodelet exited after $((t_exit2 - t1)) s, node Ready with the kubelet $((SECONDS - t_exit2)) s later"
}

main() {
  case $MODE in daemonset | process) ;; *) die "MODE=$MODE: want daemonset or process" ;; esac
  [ -x "$NODELET_BIN" ] || die "build nodelet first (make build) or set NODELET_BIN"
  bash "$bed" clean >/dev/null 2>&1 || true # a bed of its own: start from nothing
  trap teardown EXIT
  bash "$here/build-testbins.sh" csi # before the bed's registry starts: it serves the storage images
  bash "$bed" up
  bash "$here/storage.sh" up
  start_pods
  if [ "$MODE" = daemonset ]; then start_impostor; fi
  snapshot > "$BED_DIR/before.txt"
  log "under the kubelet ($(node_version)):"; cat "$BED_DIR/before.txt"
  "$MODE"
  sleep 15
  snapshot > "$BED_DIR/after-kubelet.txt"
  log "back under the kubelet ($(node_version)):"; cat "$BED_DIR/after-kubelet.txt"
  compare nodelet→kubelet "$BED_DIR/after-nodelet.txt" "$BED_DIR/after-kubelet.txt"
  [ "$FAILED" = 0 ] || die "handover ($MODE): FAILED (see RESULT lines)"
  log "handover ($MODE): every check passed"
}

main "$@"
