#!/usr/bin/env bash
# A systemd of its own, for the systemd cgroup driver's tests on a machine whose PID 1 is not systemd (this VM's
# init). systemd runs as PID 1 of new PID and mount namespaces, with private /tmp and /run (its boot-time
# clean-ups stay inside), only its own empty target started (everything else it would start at boot is masked),
# on the host's cgroup filesystem: it manages the cgroup tree from the root, as a host's systemd does. systemd
# refuses D-Bus peers from another PID namespace, so whatever talks to it runs inside: `hack/systemd.sh exec CMD`.
#
# Usage: hack/systemd.sh up | down | exec CMD [ARG...] | run CMD [ARG...] | status
# run: up, CMD inside, down (on a host whose PID 1 is systemd, CMD runs as it is).
# Settings (environment): SYSTEMD_DIR (default /var/lib/nodelet-systemd); LOGIND=1 also runs the system D-Bus and
# systemd-logind (graceful node shutdown), with a private /etc/systemd/logind.conf.d. Needs root and Debian's
# systemd (and, for LOGIND, dbus) packages.
# On a host that runs systemd as PID 1, up refuses: use the host's.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

SYSTEMD_DIR=${SYSTEMD_DIR:-/var/lib/nodelet-systemd}
PID_FILE=$SYSTEMD_DIR/systemd.pid
TARGET=nodelet-bed.target
# What systemd would start or clean up at boot in a container, masked: nothing but the target runs.
MASKED=(systemd-journald.service systemd-journald.socket systemd-journald-dev-log.socket systemd-journald-audit.socket
  systemd-tmpfiles-setup.service systemd-tmpfiles-setup-dev.service systemd-tmpfiles-clean.timer systemd-sysctl.service
  systemd-udevd.service systemd-networkd.service systemd-resolved.service
  sysinit.target basic.target rescue.target emergency.target getty.target)
# With LOGIND=1 the system D-Bus and systemd-logind run too (graceful node shutdown's inhibitor locks); else logind
# stays masked.
[ "${LOGIND:-}" = 1 ] || MASKED+=(systemd-logind.service)
# Cgroups a systemd makes at the root of the tree, removed (when empty) once it is gone.
SYSTEMD_CGROUPS=(init.scope system.slice user.slice machine.slice kubepods.slice)

running_pid() {
  local pid
  [ -f "$PID_FILE" ] || return 1
  pid=$(cat "$PID_FILE")
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = systemd ] && echo "$pid"
}

write_init() {
  mkdir -p "$SYSTEMD_DIR/run-systemd"
  cat > "$SYSTEMD_DIR/init.sh" <<EOF
#!/bin/sh
# Run by hack/systemd.sh in new PID and mount namespaces: private /tmp and /run, then systemd as PID 1.
set -e
mount --make-rprivate /
# A checkout under /tmp stays visible: held aside while the private /tmp is mounted, then put back in place.
repo=$(cd "$here/.." && pwd)
case \$repo/ in /tmp/*) mkdir -p "$SYSTEMD_DIR/repo"; mount --bind "\$repo" "$SYSTEMD_DIR/repo" ;; esac
# This kernel keeps pid_max per PID namespace: the host's, so that the node inside looks like the host.
echo $(cat /proc/sys/kernel/pid_max) > /proc/sys/kernel/pid_max || true
mount -t tmpfs -o mode=1777 tmpfs /tmp
case \$repo/ in /tmp/*) mkdir -p "\$repo"; mount --move "$SYSTEMD_DIR/repo" "\$repo" ;; esac
mount -t tmpfs -o mode=755 tmpfs /run
$( [ "${LOGIND:-}" = 1 ] && echo "mount -t tmpfs -o mode=755 tmpfs /etc/systemd/logind.conf.d # the agent's InhibitDelayMaxSec override stays inside" )
mkdir -p /run/systemd /run/lock
mount --bind "$SYSTEMD_DIR/run-systemd" /run/systemd
mkdir -p /run/systemd/system
printf '[Unit]\nDescription=nodelet test systemd\nDefaultDependencies=no\n' > /run/systemd/system/$TARGET
for u in ${MASKED[*]}; do ln -sf /dev/null /run/systemd/system/\$u; done
exec env container=nodelet /lib/systemd/systemd --unit=$TARGET --log-target=console --log-level=notice
EOF
  chmod +x "$SYSTEMD_DIR/init.sh"
}

up() {
  [ "$(id -u)" -eq 0 ] || die "needs root"
  [ "$(cat /proc/1/comm)" != systemd ] || die "this host runs systemd as PID 1: use it"
  [ -x /lib/systemd/systemd ] || die "no /lib/systemd/systemd (apt-get install systemd)"
  if pid=$(running_pid); then log "systemd already up (pid $pid)"; return 0; fi
  rm -rf "$SYSTEMD_DIR/run-systemd"
  if [ "${LOGIND:-}" = 1 ]; then mkdir -p /etc/systemd/logind.conf.d; fi # the mount point of the private one
  mount_cgroup_controllers
  write_init
  # systemd raises these global limits at start; down puts them back.
  cat /proc/sys/fs/file-max /proc/sys/fs/nr_open > "$SYSTEMD_DIR/sysctls"
  setsid unshare --pid --fork --mount --mount-proc "$SYSTEMD_DIR/init.sh" > "$SYSTEMD_DIR/systemd.log" 2>&1 < /dev/null &
  local i pid=""
  for i in $(seq 1 100); do
    pid=$(pgrep -P "$!" -x systemd 2>/dev/null || true)
    [ -z "$pid" ] || break
    sleep 0.1
  done
  [ -n "$pid" ] || { cat "$SYSTEMD_DIR/systemd.log" >&2; die "systemd did not start"; }
  echo "$pid" > "$PID_FILE"
  for i in $(seq 1 100); do
    if nsenter -t "$pid" -m -p systemctl is-active --quiet "$TARGET" 2>/dev/null; then
      log "systemd up (pid $pid, $(nsenter -t "$pid" -m -p systemctl --version | head -1))"
      [ "${LOGIND:-}" = 1 ] && start_logind "$pid"
      return 0
    fi
    sleep 0.2
  done
  cat "$SYSTEMD_DIR/systemd.log" >&2
  down
  die "systemd did not reach $TARGET"
}

# start_logind PID: the system D-Bus and systemd-logind, started without the boot targets they would wait for.
start_logind() {
  nsenter -t "$1" -m -p sh -c 'for u in dbus.socket dbus.service systemd-logind.service; do
      mkdir -p /run/systemd/system/$u.d && printf "[Unit]\nDefaultDependencies=no\n" > /run/systemd/system/$u.d/bed.conf
    done
    systemctl daemon-reload && systemctl start dbus.socket dbus.service systemd-logind.service' ||
    { down; die "systemd-logind did not start (apt-get install dbus)"; }
  log "system D-Bus and systemd-logind up"
}

# remove_cgroups: the empty cgroups a systemd made at the root of each hierarchy, deepest first.
remove_cgroups() {
  local h c
  for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    for c in "${SYSTEMD_CGROUPS[@]}"; do
      [ -d "$h$c" ] && find "$h$c" -depth -type d -exec rmdir {} \; 2>/dev/null
    done
  done
  return 0
}

down() {
  local pid
  if pid=$(running_pid); then
    kill -KILL "$pid" 2>/dev/null || true # PID 1 of its namespace: everything in it goes with it
    for _ in $(seq 1 100); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    log "systemd stopped"
  fi
  rm -f "$PID_FILE"
  remove_cgroups
  if [ -s "$SYSTEMD_DIR/sysctls" ]; then
    { read -r file_max; read -r nr_open; } < "$SYSTEMD_DIR/sysctls"
    echo "$file_max" > /proc/sys/fs/file-max || true
    echo "$nr_open" > /proc/sys/fs/nr_open || true
    rm -f "$SYSTEMD_DIR/sysctls"
  fi
}

main() {
  case "${1:-}" in
    up) up ;;
    down) down ;;
    run)
      shift
      if [ "$(cat /proc/1/comm)" = systemd ]; then exec "$@"; fi
      up
      trap down EXIT
      pid=$(running_pid)
      nsenter -t "$pid" -m -p --wd="$PWD" -- "$@" ;;
    status) if pid=$(running_pid); then echo "up (pid $pid)"; else echo down; exit 1; fi ;;
    exec)
      shift
      pid=$(running_pid) || die "systemd is not up (hack/systemd.sh up)"
      exec nsenter -t "$pid" -m -p --wd="$PWD" -- "$@" ;;
    *) die "usage: $0 up | down | exec CMD [ARG...] | run CMD [ARG...] | status" ;;
  esac
}

main "$@"
