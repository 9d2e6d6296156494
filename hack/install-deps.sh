#!/usr/bin/env bash
# Installs the test bed's Debian packages that are missing: containerd, runc, CNI plugins, static busybox,
# openssl, iproute2, iptables (for the portmap plugin), curl, util-linux, mount, procps, socat (copied into the CSI
# hostpath image), jq (hack/storage.sh), dig (bind9-dnsutils, copied into the e2e DNS test images), systemd (for the systemd cgroup driver's bed, run by hack/systemd.sh where
# PID 1 is not systemd) and dbus (its system bus and logind, for graceful node shutdown). Idempotent and quiet: apt-get update runs once per call, and only when something is
# missing. Needs root. Go is not installed here. `install-deps.sh kind` installs what hack/kind.sh needs instead:
# podman with netavark and aardvark-dns (kind's podman provider; node names resolve on its network) and
# mmdebstrap (the node image's Debian tree).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

BED_PACKAGES=(containerd runc containernetworking-plugins busybox-static openssl iproute2 iptables curl util-linux mount
  procps netcat-openbsd libseccomp-dev pkg-config systemd dbus socat jq bind9-dnsutils)

KIND_PACKAGES=(podman netavark aardvark-dns mmdebstrap)
[ "${1:-}" = kind ] && BED_PACKAGES=("${KIND_PACKAGES[@]}")

installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

# quietly CMD...: runs CMD with its output kept aside, shown only if it fails.
quietly() {
  local out rc=0
  out=$(mktemp)
  "$@" > "$out" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || { cat "$out" >&2; log "error: '$*' failed (exit $rc)"; }
  rm -f "$out"
  return "$rc"
}

missing_packages() {
  local p
  for p in "${BED_PACKAGES[@]}"; do installed "$p" || echo "$p"; done
}

main() {
  command -v go >/dev/null || { log "error: go is not on PATH (need Go $(awk '/^go /{print $2}' "$REPO_ROOT/go.mod"))"; exit 1; }
  local missing
  mapfile -t missing < <(missing_packages)
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || { log "error: missing packages ${missing[*]}; run as root to install them"; exit 1; }
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  quietly apt-get update -qq
  quietly apt-get install -y -qq --no-install-recommends "${missing[@]}"
  local still
  mapfile -t still < <(missing_packages)
  [ ${#still[@]} -eq 0 ] || { log "error: still missing after apt-get install: ${still[*]}"; exit 1; }
}

main "$@"
