#!/usr/bin/env bash
# The single-node test bed: a local registry, etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# the bed's own containerd (runc + CNI bridge) and, last, the nodelet binary if it was built. Run as root.
#
#   bed.sh up | down | clean | status | env | start COMPONENT | stop COMPONENT
#
# Everything lives under BED_DIR (default /var/lib/nodelet-bed): logs/<component>.log, pids/<component>.pid,
# pki/, etcd/, containerd/, cni/, nodelet/. Components: registry etcd apiserver controller-manager scheduler
# containerd nodelet. Settings (environment): BED_DIR, BIN_CACHE, NODELET_BIN (default $REPO_ROOT/bin/nodelet),
# NODE_NAME (default: hostname, lower-cased), NODE_IP (default: the source address of the default route),
# AGENT (nodelet, the default, or kubelet: the real kubelet as the node agent, same config file and flags),
# AGENT_NAME (the process name nodelet runs under, e.g. kubelet; default its binary's name),
# CONTAINERD (1: Debian's containerd 1.6, the default; 2: containerd 2.x and runc built from the module proxy).
# BED_SIGNING_DURATION (the controller-manager's --cluster-signing-duration, default 8760h; short for rotation tests).
# AGENT_ROOT (the agent's --root-dir; default $BED_DIR/nodelet/root, or root-kubelet for the kubelet): /var/lib/kubelet
# for storage (hack/storage.sh), whose upstream CSI manifests hard-code the kubelet's plugins, plugins_registry and
# pods folders there. A folder outside BED_DIR is noted (so is /var/lib/kubelet when the kubelet runs: it keeps its
# device plugin socket there whatever its root): down unmounts what is left under it, clean deletes it only if the
# bed made it.
# CGROUP_DRIVER (cgroupfs, the default, or systemd: containerd's runc and the agent make cgroups through systemd;
# on a host whose PID 1 is not systemd the whole bed runs inside hack/systemd.sh's systemd, which up starts and
# down stops).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
source "$here/bed/pki.sh"
source "$here/bed/configs.sh"

COMPONENTS=(registry etcd apiserver controller-manager scheduler containerd nodelet)

BED_DIR=${BED_DIR:-/var/lib/nodelet-bed}
NODELET_BIN=${NODELET_BIN:-$REPO_ROOT/bin/nodelet}
AGENT=${AGENT:-nodelet}
CGROUP_DRIVER=${CGROUP_DRIVER:-cgroupfs}
CONTAINERD=${CONTAINERD:-1}
NODE_NAME=${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}
PKI_DIR=$BED_DIR/pki
LOG_DIR=$BED_DIR/logs
PID_DIR=$BED_DIR/pids
CONTAINERD_DIR=$BED_DIR/containerd
CONTAINERD_SOCK=$BED_DIR/run/containerd.sock
CNI_BIN_DIR=/usr/lib/cni
CNI_CONF_DIR=$BED_DIR/cni/net.d
CNI_DATA_DIR=$BED_DIR/cni/networks
NODELET_DIR=$BED_DIR/nodelet
BRIDGE=nodelet0
POD_SUBNET=10.88.0.0/16
REGISTRY_ADDR=127.0.0.1:5050
APISERVER_URL=https://127.0.0.1:6443
KUBERNETES_SERVICE_IP=10.96.0.1
NAT_CHAIN=NODELET-BED-SERVICES
ADMIN_KUBECONFIG=$PKI_DIR/admin.kubeconfig
# The busybox of the bed's images: upstream's (build-testbins.sh busybox), else Debian's busybox-static.
BUSYBOX_BIN=${BUSYBOX_BIN:-$BUSYBOX_BIN_DIR/busybox}
[ -x "$BUSYBOX_BIN" ] || BUSYBOX_BIN=/bin/busybox
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

# ---------------------------------------------------------------------------------------------------------
# machine facts and tools

node_ip() {
  [ -n "${NODE_IP:-}" ] && { echo "$NODE_IP"; return; }
  local ip dev
  ip=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
  if [ -z "$ip" ]; then
    dev=$(ip -4 route show default | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -1)
    [ -n "$dev" ] && ip=$(ip -4 -o addr show dev "$dev" scope global | awk '{sub(/\/.*/, "", $4); print $4; exit}')
  fi
  [ -n "$ip" ] || die "cannot find this machine's IPv4 address (no default route?); set NODE_IP"
  echo "$ip"
}

# agent_bin: the node agent the "nodelet" component runs: nodelet, or with AGENT=kubelet the real kubelet (built by
# build-testbins.sh kubelet) with the same config file, kubeconfig and flags, for comparison.
agent_bin() {
  case $AGENT in
    nodelet)
      # AGENT_NAME: nodelet runs under that name (a link to NODELET_BIN), as on a node where it is installed as
      # the kubelet's binary.
      if [ -n "${AGENT_NAME:-}" ] && [ "$AGENT_NAME" != "$(basename "$NODELET_BIN")" ]; then
        mkdir -p "$BED_DIR/bin"
        ln -sfn "$NODELET_BIN" "$BED_DIR/bin/$AGENT_NAME"
        echo "$BED_DIR/bin/$AGENT_NAME"
      else
        echo "$NODELET_BIN"
      fi ;;
    kubelet) echo "$KUBE_BIN_DIR/kubelet" ;;
    *) die "AGENT=$AGENT: want nodelet or kubelet" ;;
  esac
}

# agent_root: the agent's --root-dir: AGENT_ROOT, else under the bed, the kubelet's apart from nodelet's.
agent_root() {
  if [ -n "${AGENT_ROOT:-}" ]; then echo "$AGENT_ROOT"
  elif [ "$AGENT" = kubelet ]; then echo "$NODELET_DIR/root-kubelet"
  else echo "$NODELET_DIR/root"; fi
}

# tools_dir: where hack/{pause,registry,crictl} are built, keyed by their sources, go.sum and the Go version.
tools_dir() {
  local key
  key=$( { go version 2>/dev/null || true; cat "$REPO_ROOT/go.sum" "$here"/pause/*.go "$here"/registry/*.go "$here"/crictl/*.go; } |
    sha256sum | cut -c1-16)
  echo "$BIN_CACHE/tools-$key"
}

build_tools() {
  local t
  TOOLS_DIR=$(tools_dir)
  for t in pause registry crictl; do
    [ -x "$TOOLS_DIR/$t" ] && continue
    log "building hack/$t into $TOOLS_DIR"
    mkdir -p "$TOOLS_DIR"
    (cd "$REPO_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$TOOLS_DIR/$t.tmp" "./hack/$t") ||
      die "go build ./hack/$t failed"
    mv "$TOOLS_DIR/$t.tmp" "$TOOLS_DIR/$t"
  done
  link_bin_dir
}

# link_bin_dir: $BED_DIR/bin holds links to every binary of the bed, for PATH.
link_bin_dir() {
  local b
  mkdir -p "$BED_DIR/bin"
  for b in "$TOOLS_DIR"/{crictl,registry,pause} "$ETCD_BIN_DIR/etcd" "$KUBE_BIN_DIR"/*; do
    [ -x "$b" ] && ln -sfn "$b" "$BED_DIR/bin/$(basename "$b")"
  done
}

# build_testbins: a build-testbins.sh already running (by hand or in the background) is waited for, not repeated.
build_testbins() {
  local waited=0
  while pgrep -f 'build-testbins\.sh' >/dev/null && [ "$waited" -lt 1800 ]; do
    [ "$waited" -eq 0 ] && log "waiting for a running build-testbins.sh to finish"
    sleep 5; waited=$((waited + 5))
  done
  BIN_CACHE=$BIN_CACHE bash "$here/build-testbins.sh"
  local b want=("$KUBE_BIN_DIR"/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl} "$ETCD_BIN_DIR/etcd")
  if [ "$AGENT" = kubelet ]; then
    BIN_CACHE=$BIN_CACHE bash "$here/build-testbins.sh" kubelet
    want+=("$KUBE_BIN_DIR/kubelet")
  fi
  if [ "$CONTAINERD" = 2 ]; then
    BIN_CACHE=$BIN_CACHE bash "$here/build-testbins.sh" containerd2
    want+=("$CONTAINERD2_BIN_DIR"/{containerd,containerd-shim-runc-v2,runc})
  fi
  for b in "${want[@]}"; do
    [ -x "$b" ] || die "$b is missing after build-testbins.sh"
  done
}

crictl() { "$TOOLS_DIR/crictl" -r "unix://$CONTAINERD_SOCK" "$@"; }
kubectl() { "$KUBE_BIN_DIR/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

# ---------------------------------------------------------------------------------------------------------
# components: command line, binary name, port, readiness, wait bound

component_cmd() {
  # shellcheck disable=SC2054 # commas inside flag values, not array separators
  case $1 in
    registry) CMD=("$TOOLS_DIR/registry" --addr "$REGISTRY_ADDR" --busybox "$BUSYBOX_BIN" --pause "$TOOLS_DIR/pause")
      # With the conformance binaries built (build-testbins.sh e2e), the upstream e2e test images are served too.
      if [ -x "$E2E_BIN_DIR/agnhost" ] && [ -x "$E2E_BIN_DIR/nnp" ]; then
        CMD+=(--e2e-bin "$E2E_BIN_DIR" --agnhost-src "$(go env GOMODCACHE)/k8s.io/kubernetes@$KUBE_VERSION/test/images/agnhost")
      fi
      # With the storage binaries built (build-testbins.sh csi), the CSI and local-path images too.
      if [ -x "$CSI_BIN_DIR/hostpathplugin" ]; then CMD+=(--csi-bin "$CSI_BIN_DIR"); fi
      # And the upstream sample device plugin's (build-testbins.sh builds it with the bed).
      if [ -x "$DEVICE_PLUGIN_BIN" ]; then CMD+=(--device-plugin "$DEVICE_PLUGIN_BIN"); fi ;;
    etcd) CMD=("$ETCD_BIN_DIR/etcd" --name bed --data-dir "$BED_DIR/etcd"
      --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379
      --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380
      --initial-cluster bed=http://127.0.0.1:2380 --unsafe-no-fsync --log-level warn) ;;
    apiserver) CMD=("$KUBE_BIN_DIR/kube-apiserver" --etcd-servers http://127.0.0.1:2379 --secure-port 6443
      --advertise-address 127.0.0.1 --endpoint-reconciler-type none --allow-privileged=true --enable-bootstrap-token-auth
      --runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true
      --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction
      --service-cluster-ip-range 10.96.0.0/16 --service-account-issuer https://kubernetes.default.svc.cluster.local
      --service-account-key-file "$PKI_DIR/sa.pub" --service-account-signing-key-file "$PKI_DIR/sa.key"
      --client-ca-file "$PKI_DIR/ca.crt" --tls-cert-file "$PKI_DIR/apiserver.crt"
      --tls-private-key-file "$PKI_DIR/apiserver.key"
      --kubelet-client-certificate "$PKI_DIR/apiserver-kubelet-client.crt"
      --kubelet-client-key "$PKI_DIR/apiserver-kubelet-client.key"
      --kubelet-preferred-address-types=InternalIP,Hostname
      --requestheader-client-ca-file "$PKI_DIR/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client
      --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group
      --requestheader-extra-headers-prefix X-Remote-Extra- --proxy-client-cert-file "$PKI_DIR/front-proxy-client.crt"
      --proxy-client-key-file "$PKI_DIR/front-proxy-client.key") ;;
    controller-manager) CMD=("$KUBE_BIN_DIR/kube-controller-manager" --bind-address 127.0.0.1
      --kubeconfig "$PKI_DIR/controller-manager.kubeconfig"
      --authentication-kubeconfig "$PKI_DIR/controller-manager.kubeconfig"
      --authorization-kubeconfig "$PKI_DIR/controller-manager.kubeconfig"
      --use-service-account-credentials --service-account-private-key-file "$PKI_DIR/sa.key"
      --root-ca-file "$PKI_DIR/ca.crt" --cluster-signing-cert-file "$PKI_DIR/ca.crt"
      --cluster-signing-key-file "$PKI_DIR/ca.key" --cluster-signing-duration "${BED_SIGNING_DURATION:-8760h}"
      --node-monitor-grace-period 20s --node-monitor-period 2s
      --leader-elect=false '--controllers=*') ;;
    scheduler) CMD=("$KUBE_BIN_DIR/kube-scheduler" --bind-address 127.0.0.1 --kubeconfig "$PKI_DIR/scheduler.kubeconfig"
      --authentication-kubeconfig "$PKI_DIR/scheduler.kubeconfig"
      --authorization-kubeconfig "$PKI_DIR/scheduler.kubeconfig" --leader-elect=false) ;;
    containerd)
      # CONTAINERD=2: containerd 2.x built by build-testbins.sh containerd2; its shim is found through PATH.
      if [ "$CONTAINERD" = 2 ]; then
        CMD=(env "PATH=$CONTAINERD2_BIN_DIR:$PATH" "$CONTAINERD2_BIN_DIR/containerd" --config "$CONTAINERD_DIR/config.toml")
      else
        CMD=(containerd --config "$CONTAINERD_DIR/config.toml")
      fi ;;
    nodelet) CMD=("$(agent_bin)" --config "$NODELET_DIR/config.yaml" --kubeconfig "$PKI_DIR/nodelet.kubeconfig"
      --root-dir "$(agent_root)" --node-ip "$(node_ip)" -v=2)
      # NODELET_EXTRA_ARGS: more flags for this start (e2e specs use it, e.g. --manifest-url).
      # shellcheck disable=SC2206 # word splitting wanted
      if [ -n "${NODELET_EXTRA_ARGS:-}" ]; then CMD+=(${NODELET_EXTRA_ARGS}); fi ;;
    *) die "unknown component '$1' (one of: ${COMPONENTS[*]})" ;;
  esac
}

component_port() {
  case $1 in
    registry) echo "${REGISTRY_ADDR##*:}" ;; etcd) echo 2379 ;; apiserver) echo 6443 ;;
    controller-manager) echo 10257 ;; scheduler) echo 10259 ;; nodelet) echo 10250 ;; *) echo "" ;;
  esac
}

component_timeout() {
  case $1 in registry | apiserver | controller-manager | scheduler | nodelet) echo 60 ;; *) echo 30 ;; esac
}

component_ready() {
  case $1 in
    registry) curl -m 5 -fs -o /dev/null "http://$REGISTRY_ADDR/v2/" ;;
    etcd) curl -m 5 -fs http://127.0.0.1:2379/health 2>/dev/null | grep -q '"health":"true"' ;;
    apiserver) curl -m 5 -fs -o /dev/null --cacert "$PKI_DIR/ca.crt" --cert "$PKI_DIR/admin.crt" \
      --key "$PKI_DIR/admin.key" "$APISERVER_URL/readyz" ;;
    controller-manager) curl -m 5 -fsk -o /dev/null https://127.0.0.1:10257/healthz ;;
    scheduler) curl -m 5 -fsk -o /dev/null https://127.0.0.1:10259/healthz ;;
    containerd) [ -S "$CONTAINERD_SOCK" ] && crictl version >/dev/null 2>&1 ;;
    nodelet) nodelet_ready ;;
  esac
}

# nodelet_ready: the Node is Ready and its Lease was renewed since this process started. Each probe is bounded
# (--request-timeout), so wait_ready's deadline holds whatever the API server does.
nodelet_ready() {
  local ready renew started
  ready=$(kubectl --request-timeout=5s get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) ||
    return 1
  [ "$ready" = True ] || return 1
  renew=$(kubectl --request-timeout=5s -n kube-node-lease get lease "$NODE_NAME" -o jsonpath='{.spec.renewTime}' 2>/dev/null) || return 1
  [ -n "$renew" ] || return 1
  started=$(stat -c %.9Y "$PID_DIR/nodelet.pid")
  awk -v r="$(date -d "$renew" +%s.%N)" -v s="$started" 'BEGIN { exit !(r >= s) }'
}

# ---------------------------------------------------------------------------------------------------------
# processes

# cmd_binary: the resolved path of the program CMD runs (past a leading `env VAR=VALUE...`).
cmd_binary() {
  local a
  for a in "${CMD[@]}"; do
    [ "$a" = env ] || [[ "$a" == *=* ]] && continue
    readlink -f "$(command -v "$a")"
    return
  done
}

pid_of() { cat "$PID_DIR/$1.pid" 2>/dev/null || true; }

# exe_of COMPONENT: the binary the live process its PID file names runs (fails when there is none).
exe_of() {
  local pid exe
  pid=$(pid_of "$1")
  [ -n "$pid" ] && alive "$pid" || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  echo "${exe% (deleted)}"
}

# running COMPONENT: its PID file names a live process of the component's binary.
running() {
  local exe
  exe=$(exe_of "$1") || return 1
  if [ -s "$PID_DIR/$1.exe" ]; then
    [ "$exe" = "$(cat "$PID_DIR/$1.exe")" ]
    return
  fi
  component_cmd "$1"
  [ "$exe" = "$(cmd_binary)" ]
}

# port_owner PORT: "pid/command" of whatever listens on the TCP port, empty if nothing does.
port_owner() {
  ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\).*/\2\/\1/p' | head -1
}

check_port_free() {
  local port owner
  port=$(component_port "$1")
  [ -n "$port" ] || return 0
  owner=$(port_owner "$port")
  [ -z "$owner" ] || die "$1: port $port is already in use by $owner (another bed? try: BED_DIR=... bed.sh down)"
}

show_log_tail() {
  log "last lines of $LOG_DIR/$1.log:"
  tail -n 30 "$LOG_DIR/$1.log" >&2 || true
}

launch() {
  local c=$1
  component_cmd "$c"
  mkdir -p "$LOG_DIR" "$PID_DIR"
  printf '\n==== %s starting: %s\n' "$(date -Is)" "${CMD[*]}" >> "$LOG_DIR/$c.log"
  # setsid: its own session, so it outlives this script and a Ctrl-C here.
  setsid "${CMD[@]}" >> "$LOG_DIR/$c.log" 2>&1 < /dev/null &
  echo $! > "$PID_DIR/$c.pid"
  # The binary it runs, so that `down` recognises the process whatever BIN_CACHE it is called with.
  cmd_binary > "$PID_DIR/$c.exe"
}

# starting COMPONENT: the PID launch just recorded is alive but has not exec'd the component yet (it is still
# the forked shell or setsid), which a loaded machine can delay past the first readiness check.
starting() {
  local exe
  exe=$(exe_of "$1") || return 1
  [ "$exe" = "$(readlink -f "$(command -v setsid)")" ] || [ "$exe" = "$(readlink -f "$BASH")" ]
}

wait_ready() {
  local c=$1 limit deadline
  limit=$(component_timeout "$c")
  deadline=$((SECONDS + limit))
  until component_ready "$c"; do
    if ! running "$c" && ! starting "$c"; then
      show_log_tail "$c"
      rm -f "$PID_DIR/$c.pid"
      die "$c exited during start-up (log: $LOG_DIR/$c.log)"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      show_log_tail "$c"
      stop_component "$c"
      die "$c was not ready after ${limit}s (log: $LOG_DIR/$c.log)"
    fi
    sleep 0.1
  done
}

# elapsed T0: seconds since the $EPOCHREALTIME value T0, to the millisecond.
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'; }

start_component() {
  local c=$1 t0=$EPOCHREALTIME
  if [ "$c" = nodelet ] && [ ! -x "$(agent_bin)" ]; then
    log "warning: $(agent_bin) not found: the node agent is not started (build it, or set NODELET_BIN)"
    return 0
  fi
  if running "$c"; then
    wait_ready "$c"
    return 0
  fi
  check_port_free "$c"
  launch "$c"
  if [ "${BED_NO_WAIT:-}" = 1 ]; then
    log "$c started (pid $(pid_of "$c")), not waiting for it to be ready (BED_NO_WAIT=1)"
    return 0
  fi
  wait_ready "$c"
  log "$c ready (pid $(pid_of "$c"), $(elapsed "$t0")s)"
}

# alive PID: the process exists and is not a zombie (PID 1 here may reap late, so /proc/PID can outlive it).
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# stop_component COMPONENT: SIGTERM, then SIGKILL after a bounded wait.
stop_component() {
  local c=$1 pid i
  running "$c" || { rm -f "$PID_DIR/$c.pid"; return 0; }
  pid=$(pid_of "$c")
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do
    alive "$pid" || break
    sleep 0.05
  done
  if alive "$pid"; then
    log "$c (pid $pid) ignored SIGTERM for 10s: killing it"
    kill -KILL "$pid" 2>/dev/null || true
    while alive "$pid"; do sleep 0.05; done
  fi
  rm -f "$PID_DIR/$c.pid" "$PID_DIR/$c.exe"
  log "$c stopped"
}

# ---------------------------------------------------------------------------------------------------------
# teardown helpers for down

# remove_sandboxes: stop and remove every CRI sandbox, so CNI tears down the veths and IP leases.
remove_sandboxes() {
  running containerd || return 0
  crictl -t 30s rmp --all >/dev/null || log "warning: crictl rmp --all failed; leftovers are cleaned below"
}

# our_shims: PIDs of containerd-shim-runc-v2 processes started by OUR containerd (their -address is our socket).
our_shims() {
  local p
  # The kernel truncates the command name containerd-shim-runc-v2 to 15 characters.
  for p in $(pgrep -x containerd-shim || true); do
    tr '\0' '\n' < "/proc/$p/cmdline" 2>/dev/null | grep -qx -- "$CONTAINERD_SOCK" && echo "$p"
  done | sort -u
}

descendants() {
  local child
  for child in $(pgrep -P "$1" || true); do
    descendants "$child"
    echo "$child"
  done
}

# shim_socket PID: the socket a containerd 1.6 shim listens on, /run/containerd/s/sha256(address/namespace/id).
shim_socket() {
  local -a args
  local ns="" id="" i
  mapfile -d '' -t args < "/proc/$1/cmdline"
  for ((i = 0; i + 1 < ${#args[@]}; i++)); do
    case ${args[i]} in -namespace) ns=${args[i + 1]} ;; -id) id=${args[i + 1]} ;; esac
  done
  echo "/run/containerd/s/$(printf '%s' "$CONTAINERD_SOCK/$ns/$id" | sha256sum | cut -c1-64)"
}

kill_shims() {
  local shim pids sock
  for shim in $(our_shims); do
    pids=$(descendants "$shim")
    sock=$(shim_socket "$shim")
    log "killing leftover shim $shim and its processes ${pids//$'\n'/ }"
    # shellcheck disable=SC2086 # word splitting intended: a list of PIDs
    kill -KILL $pids "$shim" 2>/dev/null || true
    rm -f "$sock"
  done
}

# unmount_under DIR: everything still mounted on or under DIR, deepest first.
unmount_under() {
  local m
  awk -v d="$1" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
    m=$(printf '%b' "$m")
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "warning: cannot unmount $m"
  done
}

# host_dirs [made]: the folders outside BED_DIR the bed noted (host_dir), or only those it made.
host_dirs() {
  [ -f "$BED_DIR/host-dirs" ] || return 0
  awk -v only="${1:-}" 'only == "" || $1 == only { print $2 }' "$BED_DIR/host-dirs"
}

# unmount_all: everything still mounted under BED_DIR and the noted host folders (an AGENT_ROOT's pod volumes).
unmount_all() {
  local d
  unmount_under "$BED_DIR"
  while read -r d; do unmount_under "$d"; done < <(host_dirs)
}

remove_network() {
  service_route_remove
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link delete "$BRIDGE" || log "warning: cannot delete bridge $BRIDGE"
  fi
  # Nothing runs any more, so no lease is held.
  rm -rf "${CNI_DATA_DIR:?}"/*
}

# service_route_add: pods reach the API server at the kubernetes Service's address, as kube-proxy would route it
# (the bed runs no service proxy): 10.96.0.1:443 is DNATed to NODE_IP:6443 in a nat chain of the bed's own. In-cluster
# clients in pods (CSI sidecars, provisioners, controllers) need it.
service_route_add() {
  iptables -t nat -N "$NAT_CHAIN" 2>/dev/null || iptables -t nat -F "$NAT_CHAIN"
  iptables -t nat -A "$NAT_CHAIN" -d "$KUBERNETES_SERVICE_IP/32" -p tcp --dport 443 -j DNAT --to-destination "$NODE_IP:6443"
  iptables -t nat -C PREROUTING -j "$NAT_CHAIN" 2>/dev/null || iptables -t nat -A PREROUTING -j "$NAT_CHAIN"
}

service_route_remove() {
  iptables -t nat -D PREROUTING -j "$NAT_CHAIN" 2>/dev/null || true
  iptables -t nat -F "$NAT_CHAIN" 2>/dev/null || true
  iptables -t nat -X "$NAT_CHAIN" 2>/dev/null || true
}

# ---------------------------------------------------------------------------------------------------------
# commands

prepare() {
  local ip
  [ "$(id -u)" -eq 0 ] || die "the bed needs root"
  [ ${#CONTAINERD_SOCK} -lt 100 ] || die "socket path $CONTAINERD_SOCK is too long for a unix socket; use a shorter BED_DIR"
  ip=$(node_ip)
  NODE_IP=$ip
  mount_cgroup_controllers
  if [ -n "${AGENT_ROOT:-}" ] && [[ "$AGENT_ROOT/" != "$BED_DIR/"* ]]; then host_dir "$BED_DIR" "$AGENT_ROOT"; fi
  # The kubelet keeps its device plugin socket in /var/lib/kubelet/device-plugins whatever its --root-dir.
  if [ "$AGENT" = kubelet ]; then host_dir "$BED_DIR" /var/lib/kubelet; fi
  ensure_pki
  write_configs
  service_route_add
}

# ensure_built: binaries for start/stop when up already ran (no apt, no kube build).
ensure_built() {
  if [ ! -x "$KUBE_BIN_DIR/kube-apiserver" ] || [ ! -x "$ETCD_BIN_DIR/etcd" ] || [ ! -x "$(agent_bin)" ] ||
    { [ "$CONTAINERD" = 2 ] && [ ! -x "$CONTAINERD2_BIN_DIR/containerd" ]; }; then build_testbins; fi
  build_tools
}

cmd_up() {
  local t0=$EPOCHREALTIME c
  bash "$here/install-deps.sh"
  build_testbins
  build_tools
  prepare
  for c in "${COMPONENTS[@]}"; do start_component "$c"; done
  log "bed up in $(elapsed "$t0")s"
  cat <<EOF
Admin kubeconfig: $ADMIN_KUBECONFIG
Use it with:
$(cmd_env)
  kubectl get nodes        # crictl ps -a   (CRI of the bed's containerd)
EOF
}

cmd_down() {
  local i c
  TOOLS_DIR=$(tools_dir)
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
    c=${COMPONENTS[i]}
    if [ "$c" = containerd ]; then
      [ -x "$TOOLS_DIR/crictl" ] && remove_sandboxes
      stop_component containerd
      kill_shims
    else
      stop_component "$c"
    fi
  done
  kill_shims
  unmount_all
  remove_network
  log "bed down (data kept in $BED_DIR)"
}

cmd_clean() {
  local d made
  cmd_down
  unmount_all
  mapfile -t made < <(host_dirs made)
  for d in "${made[@]}"; do
    rm -rf "${d:?}"
    log "removed $d"
  done
  rm -rf "${BED_DIR:?}"
  log "removed $BED_DIR"
}

cmd_status() {
  local c state
  for c in "${COMPONENTS[@]}"; do
    if running "$c"; then state="running (pid $(pid_of "$c"))"; else state=stopped; fi
    printf '%-20s %s\n' "$c" "$state"
  done
}

cmd_env() {
  cat <<EOF
export KUBECONFIG=$ADMIN_KUBECONFIG PATH=$KUBE_BIN_DIR:$BED_DIR/bin:\$PATH
export CONTAINER_RUNTIME_ENDPOINT=unix://$CONTAINERD_SOCK NODELET_BED_DIR=$BED_DIR NODELET_BED_SCRIPT=$here/bed.sh
EOF
}

known() {
  [[ " ${COMPONENTS[*]} " == *" $1 "* ]] || die "unknown component '$1' (one of: ${COMPONENTS[*]})"
}

cmd_start() {
  [ $# -eq 1 ] || die "usage: bed.sh start COMPONENT (${COMPONENTS[*]})"
  known "$1"
  ensure_built
  prepare
  start_component "$1"
}

cmd_stop() {
  [ $# -eq 1 ] || die "usage: bed.sh stop COMPONENT (${COMPONENTS[*]})"
  known "$1"
  stop_component "$1"
}

# in_systemd CMD [ARG...]: the bed command run inside hack/systemd.sh's systemd (systemd takes D-Bus calls only
# from its own PID namespace, and the bed's PIDs are that namespace's): up starts it first; down and clean stop
# it after, and then clean up on the host what outlives it (network, mounts).
in_systemd() {
  local rc=0 cmd=$1
  [ "$cmd" != up ] || bash "$here/systemd.sh" up
  if bash "$here/systemd.sh" status >/dev/null 2>&1; then
    bash "$here/systemd.sh" exec bash "$here/bed.sh" "$@" || rc=$?
  elif [ "$cmd" != down ] && [ "$cmd" != clean ]; then
    die "the bed's systemd is not up (CGROUP_DRIVER=systemd bed.sh up starts it)"
  fi
  if [ "$cmd" = down ] || [ "$cmd" = clean ]; then
    bash "$here/systemd.sh" down
    TOOLS_DIR=$(tools_dir)
    "cmd_$cmd"
  fi
  return "$rc"
}

main() {
  local cmd=${1:-}
  if [ "$CGROUP_DRIVER" = systemd ] && [ "$(cat /proc/1/comm)" != systemd ]; then
    in_systemd "$@"
    return
  fi
  [ $# -gt 0 ] && shift
  TOOLS_DIR=$(tools_dir)
  case $cmd in
    up | down | clean | status | env | start | stop) "cmd_$cmd" "$@" ;;
    *) echo "usage: bed.sh up|down|clean|status|env|start COMPONENT|stop COMPONENT" >&2; exit 2 ;;
  esac
}

main "$@"
