#!/usr/bin/env bash
# Fault injection on the bed (make chaos): each fault run with each node agent (AGENTS, default "nodelet kubelet"),
# each on a bed of its own (BED_DIR default /var/lib/nodelet-bed-chaos, cleaned first). Per fault and agent it
# prints a CHAOS line: the time from the fault's end (the component started again) until every pod converged,
# and what went wrong — pods stuck (not converged 180 s after), containers restarted that should not have, pods
# with more than one running container of a name (duplicates), and what the deleted pods left behind 2 minutes
# after they were gone (sandboxes, containers, pod directories, mounts).
#
# Faults (ROUNDS, default 3, of each):
#   containerd-burst   containerd SIGKILLed 0.2–2 s into a burst of N pods (default 30), then started again;
#   containerd-delete  the same in the middle of the deletion of N running pods;
#   agent-burst        the agent SIGKILLed 0.2–2 s into a burst of N pods, then started again;
#   agent-delete       the same in the middle of the deletion of N running pods;
#   apiserver-down     kube-apiserver and etcd stopped for DOWN seconds (default 60) just after N/3 pods were created
#                      (starting meanwhile), N/3 pods that finish 5 s later were created and N/3 running pods were
#                      deleted, with N/3 pods running all along; converged = the new and the old ones Running, the
#                      finishing ones Succeeded, the deleted ones gone, counted from the API server's return.
#   api-cut            N running pods; the agent's packets to the API server dropped (iptables, matched by a net_cls
#                      class the agent's process is moved into) for CUT seconds (default 120): the node goes NotReady,
#                      the pods keep running; converged = the node Ready again and every pod Running, from the cut's end;
#   clock-step         N running pods; the machine's clock stepped 10 minutes forward, N/3 new pods created, the clock
#                      stepped back after STEP seconds (default 60) and N/3 more created; converged = the node Ready
#                      and every pod Running, from the step back.
#   disk-full          the agent restarted with its root dir on a small loop-mounted filesystem (DISK_MIB, default
#                      512) and no disk eviction thresholds (the fault is the full disk, not the eviction of pods);
#                      N/2 pods writing to an emptyDir run, the filesystem is filled up (a file as large as what is
#                      free), N/2 more pods are created, and FULL seconds later (default 30) the file is removed;
#                      converged = every pod Running, from the removal; afterwards every JSON state file the agent
#                      wrote in its root dir must parse.
# FAULTS picks some (default all). agent-burst and agent-delete with N=50 ROUNDS=10 are the agent killed at random
# points while 50 pods start and while they stop. Needs root; one bed at a time on a machine.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

export BED_DIR=${BED_DIR:-/var/lib/nodelet-bed-chaos} BIN_CACHE
AGENTS=${AGENTS:-nodelet kubelet}
FAULTS=${FAULTS:-containerd-burst containerd-delete agent-burst agent-delete apiserver-down api-cut clock-step disk-full}
ROUNDS=${ROUNDS:-3}
N=${N:-30}
DOWN=${DOWN:-60}
CUT=${CUT:-120}
STEP=${STEP:-60}
FULL=${FULL:-30}
DISK_MIB=${DISK_MIB:-512}
NS=chaos
bed="$here/bed.sh"
FAILED=0

K() { "$KUBE_BIN_DIR/kubectl" --kubeconfig "$BED_DIR/pki/admin.kubeconfig" "$@"; }
crictl_bed() { "$BED_DIR/bin/crictl" -r "unix://$BED_DIR/run/containerd.sock" "$@"; }
agent_root() {
  if [ -n "${AGENT_ROOT:-}" ]; then echo "$AGENT_ROOT"
  elif [ "$AGENT" = kubelet ]; then echo "$BED_DIR/nodelet/root-kubelet"
  else echo "$BED_DIR/nodelet/root"; fi
}

# pods_yaml [PREFIX [SECONDS]]: N busybox pods bound to the node, quick to stop, named PREFIX1.. (default p),
# sleeping SECONDS (default 3600; a pod that sleeps less finishes: restartPolicy Never).
pods_yaml() {
  local node i prefix=${1:-p} secs=${2:-3600}; node=$(K get node -o jsonpath='{.items[0].metadata.name}')
  for i in $(seq 1 "$N"); do
    cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: $prefix$i, namespace: $NS, labels: {group: $prefix}}
spec:
  nodeName: $node
  restartPolicy: $([ "$secs" = 3600 ] && echo Always || echo Never)
  terminationGracePeriodSeconds: 2
  automountServiceAccountToken: false
  containers: [{name: c, image: busybox, command: [sleep, "$secs"]}]
YAML
  done
}

running() { K get pods -n "$NS" --no-headers 2>/dev/null | grep -c ' Running ' || true; }
present() { K get pods -n "$NS" --no-headers 2>/dev/null | grep -c . || true; }

# wait_until CMD WANT: seconds (fractional) until CMD prints WANT, or "stuck" after 180 s.
wait_until() {
  local t0=$EPOCHREALTIME
  while [ "$($1)" != "$2" ]; do
    if awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a > 180) }'; then echo stuck; return; fi
    sleep 0.2
  done
  awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

# kill_and_restart COMPONENT: SIGKILL it, then start it again through bed.sh.
kill_and_restart() {
  local pid; pid=$(cat "$BED_DIR/pids/$1.pid")
  kill -KILL "$pid"
  while [ -d "/proc/$pid" ]; do sleep 0.05; done
  bash "$bed" start "$1" >/dev/null
}

# restarts: the restart counts of the pods' containers, summed.
restarts() {
  K get pods -n "$NS" -o jsonpath='{range .items[*]}{range .status.containerStatuses[*]}{.restartCount}{"\n"}{end}{end}' |
    awk '{ s += $1 } END { print s + 0 }'
}

# duplicates: pods with more than one running container named c.
# (hack/crictl's tables: pods "ID AGE ago STATE NAME NAMESPACE ATTEMPT", ps "ID IMAGE AGE ago STATE NAME ATTEMPT POD".)
duplicates() {
  local sandboxes; sandboxes=$(crictl_bed pods | awk -v ns="$NS" 'NR > 1 && $6 == ns { print $1 }')
  crictl_bed ps | awk -v s="$sandboxes" 'BEGIN { split(s, ids); for (i in ids) mine[ids[i]] = 1 } NR > 1 && ($8 in mine) { print $8 "/" $6 }' |
    sort | uniq -d | grep -c . || true
}

# leaks UIDS...: what the runtime, the agent's root, the mounts and the pod cgroups still hold of these deleted pods.
leaks() { pod_leaks "$NS" "$(agent_root)" "$@"; }

uids() { K get pods -n "$NS" -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}'; }

# settle_leaks UIDS...: leaks, given the agent 2 minutes to clean up after the pods are gone (the kubelet removes
# the sandboxes of deleted pods in its container garbage collection, every minute).
settle_leaks() {
  local i l
  for i in $(seq 1 240); do
    l=$(leaks "$@")
    [ "$l" = " none" ] && break
    sleep 0.5
  done
  echo "$l"
}

report() { # FAULT ROUND CONVERGE RESTARTS DUPLICATES LEAKS
  echo "CHAOS agent=$AGENT fault=$1 round=$2 converged_after_s=$3 restarted=$4 duplicates=$5 left:$6"
  if [ "$3" = stuck ] || [ "$4" != 0 ] || [ "$5" != 0 ] || [ "$6" != " none" ]; then FAILED=1; fi
}

fresh_namespace() {
  K delete namespace "$NS" --wait=true --timeout=180s >/dev/null 2>&1 || true
  K create namespace "$NS" >/dev/null
  until K get serviceaccount -n "$NS" default >/dev/null 2>&1; do sleep 0.2; done
}

delay() { awk -v r="$RANDOM" 'BEGIN { printf "%.1f", 0.2 + (r % 19) / 10 }'; }

# burst COMPONENT FAULT ROUND: the pods created, COMPONENT killed meanwhile; converged = all Running.
burst() {
  local d ids conv r dup
  fresh_namespace
  pods_yaml | K apply -f - >/dev/null &
  d=$(delay)
  sleep "$d"
  kill_and_restart "$1"
  wait
  conv=$(wait_until running "$N")
  r=$(restarts); dup=$(duplicates)
  mapfile -t ids < <(uids)
  K delete pods -n "$NS" --all --wait=true --timeout=180s >/dev/null || true
  report "$2" "$3 (kill at ${d}s)" "$conv" "$r" "$dup" "$(settle_leaks "${ids[@]}")"
}

# deletion COMPONENT FAULT ROUND: N running pods deleted, COMPONENT killed meanwhile; converged = all gone.
deletion() {
  local d ids conv
  fresh_namespace
  pods_yaml | K apply -f - >/dev/null
  [ "$(wait_until running "$N")" != stuck ] || { report "$2" "$3" stuck - - "(pods never ran)"; return; }
  mapfile -t ids < <(uids)
  K delete pods -n "$NS" --all --wait=false >/dev/null &
  d=$(delay)
  sleep "$d"
  kill_and_restart "$1"
  wait
  conv=$(wait_until present 0)
  report "$2" "$3 (kill at ${d}s)" "$conv" 0 0 "$(settle_leaks "${ids[@]}")"
}

# in_phase GROUP PHASE: how many pods of GROUP are in PHASE.
in_phase() { K get pods -n "$NS" -l "group=$1" --no-headers 2>/dev/null | grep -c " $2 " || true; }

# api_converged: every old and new pod Running, every finishing pod Completed, every deleted one gone.
api_converged() {
  if [ "$(in_phase old Running)" = "$N" ] && [ "$(in_phase new Running)" = "$N" ] && [ "$(in_phase fin Completed)" = "$N" ] &&
    [ "$(K get pods -n "$NS" -l group=del --no-headers 2>/dev/null | grep -c . || true)" = 0 ]; then echo yes; else echo no; fi
}

# api_down FAULT ROUND: old and del pods running; new and fin pods created and del pods deleted, then the API
# server and etcd stopped for DOWN seconds.
api_down() {
  local ids deleted conv r dup
  # Four groups of N/3 pods: with the deleted ones still counted while they stop, 4N/3 fit in maxPods (110).
  local N=$((N / 3))
  fresh_namespace
  { pods_yaml old; pods_yaml del; } | K apply -f - >/dev/null
  if [ "$(wait_until running $((2 * N)))" = stuck ]; then report "$1" "$2" stuck - - "(pods never ran)"; return; fi
  { pods_yaml new; pods_yaml fin 5; } | K apply -f - >/dev/null
  mapfile -t deleted < <(K get pods -n "$NS" -l group=del -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}')
  K delete pods -n "$NS" -l group=del --wait=false >/dev/null
  sleep 0.5
  bash "$bed" stop apiserver >/dev/null
  bash "$bed" stop etcd >/dev/null
  sleep "$DOWN"
  bash "$bed" start etcd >/dev/null
  bash "$bed" start apiserver >/dev/null
  conv=$(wait_until api_converged yes)
  if [ "$conv" = stuck ]; then
    log "not converged: $(K get pods -n "$NS" --no-headers | awk '{ print $1 "=" $3 }' | sort -t= -k2 | awk -F= '{ n[$2]++ } END { for (k in n) printf "%s:%d ", k, n[k] }')"
    K get pods -n "$NS" --no-headers | grep -v ' Running \| Completed ' | head -5 >&2 || true
  fi
  r=$(K get pods -n "$NS" -l 'group in (old,new)' \
    -o jsonpath='{range .items[*]}{range .status.containerStatuses[*]}{.restartCount}{"\n"}{end}{end}' | awk '{ s += $1 } END { print s + 0 }')
  dup=$(duplicates)
  mapfile -t ids < <(uids)
  K delete pods -n "$NS" --all --wait=true --timeout=180s >/dev/null || true
  report "$1" "$2 (down ${DOWN}s)" "$conv" "$r" "$dup" "$(settle_leaks "${ids[@]}" "${deleted[@]}")"
}

node_ready() { K get node -o jsonpath='{.items[0].status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true; }

# ready_and_running: the node Ready and every pod of the namespace Running.
ready_and_running() {
  if [ "$(node_ready)" = True ] && [ "$(running)" = "$(present)" ]; then echo yes; else echo no; fi
}

# the net_cls class whose packets api-cut drops, and its cgroup.
CUT_CLASSID=0x00100001
CUT_CGROUP=/sys/fs/cgroup/net_cls/nodelet-chaos

# uncut: the agent's packets flow again (also run on exit).
uncut() {
  while iptables -D OUTPUT -m cgroup --cgroup "$CUT_CLASSID" -p tcp --dport 6443 -j DROP 2>/dev/null; do :; done
  if [ -d "$CUT_CGROUP" ]; then
    local p
    for p in $(cat "$CUT_CGROUP/cgroup.procs" 2>/dev/null); do echo "$p" > /sys/fs/cgroup/net_cls/cgroup.procs 2>/dev/null || true; done
    rmdir "$CUT_CGROUP" 2>/dev/null || true
  fi
}

# api_cut FAULT ROUND: the agent cut off from the API server for CUT seconds with N pods running.
api_cut() {
  local pid ids conv r dup notready=no t0
  [ -d /sys/fs/cgroup/net_cls ] || { log "api-cut needs the net_cls cgroup controller (cgroup v1): skipped"; return; }
  fresh_namespace
  pods_yaml | K apply -f - >/dev/null
  if [ "$(wait_until running "$N")" = stuck ]; then report "$1" "$2" stuck - - "(pods never ran)"; return; fi
  pid=$(cat "$BED_DIR/pids/nodelet.pid")
  mkdir -p "$CUT_CGROUP"
  echo "$CUT_CLASSID" > "$CUT_CGROUP/net_cls.classid"
  echo "$pid" > "$CUT_CGROUP/cgroup.procs"
  iptables -I OUTPUT -m cgroup --cgroup "$CUT_CLASSID" -p tcp --dport 6443 -j DROP
  t0=$SECONDS
  while [ $((SECONDS - t0)) -lt "$CUT" ]; do
    [ "$(node_ready)" = True ] || notready=yes
    sleep 1
  done
  uncut
  log "api-cut round $2: node NotReady during the cut: $notready; pods Running at its end: $(running)/$N"
  conv=$(wait_until ready_and_running yes)
  r=$(restarts); dup=$(duplicates)
  mapfile -t ids < <(uids)
  K delete pods -n "$NS" --all --wait=true --timeout=180s >/dev/null || true
  report "$1" "$2 (cut ${CUT}s, NotReady:$notready)" "$conv" "$r" "$dup" "$(settle_leaks "${ids[@]}")"
}

# clock_step FAULT ROUND: the clock 10 minutes ahead for STEP seconds, pods created on both sides of the step back.
clock_step() {
  local ids conv r dup N3=$((N / 3))
  fresh_namespace
  pods_yaml old | K apply -f - >/dev/null
  if [ "$(wait_until running "$N")" = stuck ]; then report "$1" "$2" stuck - - "(pods never ran)"; return; fi
  date -s "+10 minutes" >/dev/null
  STEPPED=1
  N=$N3 pods_yaml ahead | K apply -f - >/dev/null
  sleep "$STEP"
  date -s "-10 minutes" >/dev/null
  STEPPED=
  N=$N3 pods_yaml back | K apply -f - >/dev/null
  conv=$(wait_until ready_and_running yes)
  if [ "$(present)" != $((N + 2 * N3)) ]; then conv="$conv (only $(present) pods)"; fi
  r=$(restarts); dup=$(duplicates)
  mapfile -t ids < <(uids)
  K delete pods -n "$NS" --all --wait=true --timeout=180s >/dev/null || true
  report "$1" "$2 (+10 min for ${STEP}s)" "$conv" "$r" "$dup" "$(settle_leaks "${ids[@]}")"
}

# the loop filesystem disk-full puts the agent's root dir on.
DISK_IMG=/var/lib/nodelet-chaos-disk.img
DISK_DIR=/var/lib/nodelet-chaos-disk

# disk_off: the loop filesystem unmounted and removed (also run on exit).
disk_off() {
  if mountpoint -q "$DISK_DIR" 2>/dev/null; then
    local m
    for m in $(awk -v d="$DISK_DIR/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r); do umount "$m" 2>/dev/null || umount -l "$m" || true; done
    umount "$DISK_DIR" 2>/dev/null || umount -l "$DISK_DIR" || true
  fi
  rm -f "$DISK_IMG"
}

# corrupt_state DIR: the JSON state files under DIR (outside the pods' volumes) that do not parse, or " none".
corrupt_state() {
  python3 - "$1" <<'PY'
import json, os, sys
root, bad = sys.argv[1], []
for d, dirs, files in os.walk(root):
    if "/volumes" in d[len(root):] or "/volume-subpaths" in d[len(root):]:
        dirs[:] = []
        continue
    for f in files:
        p = os.path.join(d, f)
        try:
            with open(p, "rb") as fh:
                b = fh.read(1 << 20)
        except OSError:
            continue
        if b.lstrip()[:1] not in (b"{", b"["):
            continue
        try:
            json.loads(b)
        except ValueError:
            bad.append(os.path.relpath(p, root))
print(" " + (" ".join(bad) if bad else "none"))
PY
}

# writer_pods_yaml PREFIX: N/2 pods writing 8 MiB into an emptyDir every second, over the same blocks once they have
# them (a rewrite that freed its blocks first would leave room on the full disk); errors ignored.
writer_pods_yaml() {
  local node i; node=$(K get node -o jsonpath='{.items[0].metadata.name}')
  for i in $(seq 1 $((N / 2))); do
    cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: $1$i, namespace: $NS, labels: {group: $1}}
spec:
  nodeName: $node
  terminationGracePeriodSeconds: 2
  automountServiceAccountToken: false
  volumes: [{name: data, emptyDir: {}}]
  containers:
  - name: c
    image: busybox
    command: [sh, -c, 'trap "exit 0" TERM; while true; do dd if=/dev/zero of=/data/f bs=1M count=8 conv=notrunc 2>/dev/null; sleep 1; done']
    volumeMounts: [{name: data, mountPath: /data}]
YAML
  done
}

# restart_agent [ENV...]: the agent stopped and started again with these settings (AGENT_ROOT, NODELET_EXTRA_ARGS).
restart_agent() {
  bash "$bed" stop nodelet >/dev/null
  env "$@" bash "$bed" start nodelet >/dev/null
  until [ "$(node_ready)" = True ]; do sleep 0.5; done
}

# disk_full FAULT ROUND: the agent's root dir's filesystem full while pods write and start.
disk_full() {
  local ids conv r dup free left corrupt
  fresh_namespace
  disk_off
  truncate -s "${DISK_MIB}M" "$DISK_IMG"
  mkfs.ext4 -q -F -m 0 "$DISK_IMG" # no blocks reserved for root: the agent runs as root
  mkdir -p "$DISK_DIR"
  mount -o loop "$DISK_IMG" "$DISK_DIR"
  restart_agent AGENT_ROOT="$DISK_DIR" NODELET_EXTRA_ARGS="--eviction-hard=memory.available<100Mi"
  N=$((N / 2 * 2))
  writer_pods_yaml w | K apply -f - >/dev/null
  if [ "$(wait_until running $((N / 2)))" = stuck ]; then report "$1" "$2" stuck - - "(pods never ran)"; fi
  free=$(df -B1 --output=avail "$DISK_DIR" | tail -1)
  fallocate -l "$free" "$DISK_DIR/chaos-fill" 2>/dev/null || dd if=/dev/zero of="$DISK_DIR/chaos-fill" bs=1M 2>/dev/null || true
  log "disk-full round $2: $(df -h --output=avail "$DISK_DIR" | tail -1 | tr -d ' ') left on the agent's root filesystem"
  writer_pods_yaml s | K apply -f - >/dev/null
  sleep "$FULL"
  log "disk-full round $2: pods Running while full: $(running)/$N"
  rm -f "$DISK_DIR/chaos-fill"
  conv=$(wait_until running "$N")
  r=$(restarts); dup=$(duplicates)
  corrupt=$(corrupt_state "$DISK_DIR")
  mapfile -t ids < <(uids)
  K delete pods -n "$NS" --all --wait=true --timeout=180s >/dev/null || true
  left=$(AGENT_ROOT=$DISK_DIR settle_leaks "${ids[@]}")
  [ "$corrupt" = " none" ] || left="$left corrupt:$corrupt"
  report "$1" "$2 (full ${FULL}s)" "$conv" "$r" "$dup" "$left"
  bash "$bed" stop nodelet >/dev/null
  disk_off
  restart_agent
}

run_agent() {
  export AGENT=$1
  log "chaos with AGENT=$AGENT: a bed of its own in $BED_DIR"
  bash "$bed" clean >/dev/null 2>&1 || true
  bash "$bed" up >/dev/null
  local f r
  for f in $FAULTS; do
    for r in $(seq 1 "$ROUNDS"); do
      case $f in
        containerd-burst) burst containerd "$f" "$r" ;;
        containerd-delete) deletion containerd "$f" "$r" ;;
        agent-burst) burst nodelet "$f" "$r" ;;
        agent-delete) deletion nodelet "$f" "$r" ;;
        apiserver-down) api_down "$f" "$r" ;;
        api-cut) api_cut "$f" "$r" ;;
        clock-step) clock_step "$f" "$r" ;;
        disk-full) disk_full "$f" "$r" ;;
        *) die "unknown fault $f" ;;
      esac
    done
  done
  bash "$bed" down >/dev/null
}

main() {
  [ "$(id -u)" -eq 0 ] || die "needs root"
  trap 'uncut; if [ -n "${STEPPED:-}" ]; then date -s "-10 minutes" >/dev/null; fi; bash "$bed" down >/dev/null 2>&1 || true; disk_off' EXIT
  local a
  for a in $AGENTS; do run_agent "$a"; done
  [ "$FAILED" = 0 ] || die "chaos: something was lost, stuck, restarted or left behind (see the CHAOS lines)"
  log "chaos: nothing lost, stuck, restarted or left behind"
}

main "$@"
