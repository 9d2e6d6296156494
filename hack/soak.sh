#!/usr/bin/env bash
# A soak on the bed (make soak): steady churn for DURATION (default 1h) with one node agent (AGENT, default nodelet;
# AGENT=kubelet for the kubelet), on a bed of its own (BED_DIR default /var/lib/nodelet-bed-soak, cleaned first).
#
# The churn, every CYCLE seconds (default 10): BATCH new pods (default 5) created — each with exec readiness and
# liveness probes, one in five with a container that exits once and is restarted — and the previous
# cycle's batch deleted; `kubectl logs` and `kubectl exec` on one of LONG long-lived pods (default 10) that run
# throughout with probes. Every SAMPLE seconds (default 60) a SOAK line: the agent's RSS and anonymous RSS (without
# the pages of its binary), goroutines (go_goroutines
# of its /metrics), open files and CPU seconds used. At the end every pod is deleted and the node must hold nothing of
# them 2 minutes later (sandboxes, containers, pod directories, mounts, pod cgroups); the growth per hour of each
# sampled figure (least squares over the samples after the first quarter, and over the second half) is printed, and
# the samples are kept in $BED_DIR/soak.tsv. Needs root; one bed at a time on a machine.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

export BED_DIR=${BED_DIR:-/var/lib/nodelet-bed-soak} BIN_CACHE AGENT=${AGENT:-nodelet}
DURATION=${DURATION:-1h}
CYCLE=${CYCLE:-10}
BATCH=${BATCH:-5}
LONG=${LONG:-10}
SAMPLE=${SAMPLE:-60}
NS=soak
bed="$here/bed.sh"

K() { "$KUBE_BIN_DIR/kubectl" --kubeconfig "$BED_DIR/pki/admin.kubeconfig" "$@"; }
agent_root() { if [ "$AGENT" = kubelet ]; then echo "$BED_DIR/nodelet/root-kubelet"; else echo "$BED_DIR/nodelet/root"; fi; }

# seconds DURATION: 90, 90s, 15m, 1h → seconds.
seconds() {
  case $1 in
    *h) echo $((${1%h} * 3600)) ;; *m) echo $((${1%m} * 60)) ;; *s) echo "${1%s}" ;; *) echo "$1" ;;
  esac
}

# pod NAME GROUP [CRASH]: a busybox pod with probes; CRASH: its container exits 1 once (a marker file in an
# emptyDir remembers) and runs after its restart.
pod() {
  local script="while :; do sleep 3600; done"
  [ -n "${3:-}" ] && script='[ -f /v/once ] || { touch /v/once; exit 1; }; while :; do sleep 3600; done'
  cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $NS, labels: {group: $2}}
spec:
  nodeName: $NODE
  terminationGracePeriodSeconds: 2
  automountServiceAccountToken: false
  volumes: [{name: v, emptyDir: {}}]
  containers:
  - name: c
    image: busybox
    command: [sh, -c, 'echo started; $script']
    volumeMounts: [{name: v, mountPath: /v}]
    readinessProbe: {exec: {command: ["true"]}, periodSeconds: 5}
    livenessProbe: {exec: {command: ["true"]}, periodSeconds: 10}
YAML
}

agent_pid() { cat "$BED_DIR/pids/nodelet.pid"; }

# sample: elapsed-seconds rss-MiB goroutines open-files cpu-seconds anon-rss-MiB (RSS less the binary's pages
# read from its file, which grow as more of its code runs and are the page cache's to reclaim)
sample() {
  local pid rss fds cpu gor anon
  pid=$(agent_pid)
  rss=$(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
  anon=$(awk '/^RssAnon:/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
  fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  cpu=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$pid/stat")
  gor=$(K get --raw "/api/v1/nodes/$NODE/proxy/metrics" 2>/dev/null | awk '/^go_goroutines / { print $2 }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$((SECONDS - T0))" "$rss" "${gor:-0}" "$fds" "$cpu" "$anon"
}

# leaks UIDS...: what the runtime, the agent's root, the mounts and the pod cgroups still hold of these pods.
leaks() { pod_leaks "$NS" "$(agent_root)" "$@"; }

# growth COLUMN [PARTS]: the slope per hour of that column of soak.tsv (least squares) over the samples after the first
# of PARTS equal parts of the run (default 4: after the first quarter).
growth() {
  awk -F'\t' -v c="$1" -v parts="${2:-4}" '{ t[NR] = $1; v[NR] = $c } END {
    s = int(NR / parts) + 1; n = 0
    for (i = s; i <= NR; i++) { n++; st += t[i]; sv += v[i]; stt += t[i] * t[i]; stv += t[i] * v[i] }
    d = n * stt - st * st
    if (n < 2 || d == 0) { print "n/a"; exit }
    printf "%.2f", (n * stv - st * sv) / d * 3600 }' "$BED_DIR/soak.tsv"
}

main() {
  [ "$(id -u)" -eq 0 ] || die "needs root"
  local total; total=$(seconds "$DURATION")
  trap 'bash "$bed" down >/dev/null 2>&1 || true' EXIT
  bash "$bed" clean >/dev/null 2>&1 || true
  bash "$bed" up >/dev/null
  NODE=$(K get node -o jsonpath='{.items[0].metadata.name}')
  K create namespace "$NS" >/dev/null
  until K get serviceaccount -n "$NS" default >/dev/null 2>&1; do sleep 0.2; done
  local i
  for i in $(seq 1 "$LONG"); do pod "long$i" long; done | K apply -f - >/dev/null
  K wait -n "$NS" pod -l group=long --for=condition=Ready --timeout=180s >/dev/null
  log "soak with AGENT=$AGENT for $DURATION: $LONG long-lived pods, $BATCH pods made and deleted every ${CYCLE}s"
  T0=$SECONDS
  : > "$BED_DIR/soak.tsv"
  local cycle=0 next_sample=0 made=0 failed_calls=0 prev="" batch name
  declare -A seen=()
  while [ $((SECONDS - T0)) -lt "$total" ]; do
    if [ $((SECONDS - T0)) -ge "$next_sample" ]; then
      sample | tee -a "$BED_DIR/soak.tsv" | awk -F'\t' '{ printf "SOAK t=%ss rss_mib=%s anon_rss_mib=%s goroutines=%s open_files=%s cpu_s=%s\n", $1, $2, $6, $3, $4, $5 }'
      next_sample=$((next_sample + SAMPLE))
    fi
    cycle=$((cycle + 1))
    batch="b$cycle"
    for i in $(seq 1 "$BATCH"); do
      if [ $((i % 5)) = 0 ]; then pod "$batch-$i" "$batch" crash; else pod "$batch-$i" "$batch"; fi
    done | K apply -f - >/dev/null
    made=$((made + BATCH))
    if [ -n "$prev" ]; then
      while read -r name; do seen[$name]=1; done < <(K get pods -n "$NS" -l "group=$prev" -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}')
      K delete pods -n "$NS" -l "group=$prev" --wait=false >/dev/null
    fi
    prev=$batch
    name="long$(((cycle % LONG) + 1))"
    K logs -n "$NS" "$name" --tail=1 2>/dev/null | grep -q '^started$' || failed_calls=$((failed_calls + 1))
    [ "$(K exec -n "$NS" "$name" -- echo ok 2>/dev/null)" = ok ] || failed_calls=$((failed_calls + 1))
    sleep "$CYCLE"
  done
  sample >> "$BED_DIR/soak.tsv"
  while read -r name; do seen[$name]=1; done < <(K get pods -n "$NS" -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}')
  local restarts
  restarts=$(K get pods -n "$NS" -l group=long -o jsonpath='{range .items[*]}{range .status.containerStatuses[*]}{.restartCount}{"\n"}{end}{end}' |
    awk '{ s += $1 } END { print s + 0 }')
  K delete namespace "$NS" --wait=true --timeout=300s >/dev/null || true
  local l
  for i in $(seq 1 240); do
    l=$(leaks "${!seen[@]}")
    [ "$l" = " none" ] && break
    sleep 0.5
  done
  log "SOAK RESULT agent=$AGENT duration=${total}s pods_made=$((made + LONG)) failed_logs_exec_calls=$failed_calls long_pod_restarts=$restarts left:$l"
  log "SOAK GROWTH per hour (after the first quarter): rss_mib=$(growth 2) anon_rss_mib=$(growth 6) goroutines=$(growth 3) open_files=$(growth 4); cpu_s=$(tail -1 "$BED_DIR/soak.tsv" | cut -f5) in total"
  # The event recorder's caches (1024 entries each at the default maxPods; the kubelet's hold 4096) fill with
  # this churn's first ~1000 pods, about 38 minutes in: the second half's slope is what grows once they are full.
  log "SOAK GROWTH per hour (second half): rss_mib=$(growth 2 2) anon_rss_mib=$(growth 6 2) goroutines=$(growth 3 2) open_files=$(growth 4 2)"
  [ "$l" = " none" ] && [ "$failed_calls" = 0 ] && [ "$restarts" = 0 ] || die "soak: something was left behind, a call failed or a long-lived pod restarted"
}

main "$@"
