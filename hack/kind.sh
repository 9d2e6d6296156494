#!/usr/bin/env bash
# kind clusters without Docker: node images built here and run by podman (kind's podman provider).
#
#   hack/kind.sh image   the node images, kind's layout (sigs.k8s.io/kind images/base, then its node image
#                        steps) on a Debian rootfs made by mmdebstrap from Debian's packages, with the cluster's
#                        images preloaded (kubeadm's, kind's storage, the flannel pod network):
#                          $KIND_IMAGE:$KUBE_VERSION          the kubelet $KUBE_VERSION (NODE_AGENT=kubelet)
#                          $KIND_IMAGE:$KUBE_VERSION-nodelet  the same with nodelet as /usr/bin/kubelet:
#                                                             kubeadm's unit, drop-ins, flags and files unchanged
#   hack/kind.sh up      kind create cluster (KIND_CLUSTER, one control plane and WORKERS workers) from the
#                        images, the pod network, then waits for every node to be Ready; the context is left
#                        where kind leaves it ($KUBECONFIG, else ~/.kube/config)
#   hack/kind.sh down    kind delete cluster
#   hack/kind.sh smoke   a Deployment over the workers behind a Service, reached from a pod on the control
#                        plane by the Service's DNS name (kube-proxy, cluster DNS, pod traffic between nodes)
#   hack/kind.sh multinode
#                        a DaemonSet on every node, topology spread, a worker's agent stopped (NotReady, tainted,
#                        its pods evicted and replaced, then back), kubectl drain (hack/kind/multinode.yaml)
#   hack/kind.sh takeover
#                        a cluster of kubelet nodes whose workers are handed to nodelet through deploy/kind
#                        (docs/deploy.md) with no container restarted, then the smoke check
#   hack/kind.sh boot    starts one node container of the image and checks that systemd brings containerd up
#   hack/kind.sh conformance
#                        the CNCF conformance suite ([Conformance], the [Serial] specs alone after the rest) on
#                        the cluster through hydrophone, with upstream's conformance image and e2e test images
#                        built here and served to the nodes from a registry on the kind network's gateway
#   hack/kind.sh judge   for each of KIND_AGENTS (default "nodelet kubelet"): a cluster of its nodes, the suite
#                        on it, the cluster deleted; then the passed lists compared
#
# Settings: NODE_AGENT (nodelet|kubelet; CONTROL_PLANE_AGENT and WORKER_AGENT for a mixed cluster), WORKERS
# (default 2), KIND_CLUSTER (default nodelet), KIND_CONFORMANCE_PROCS (default 4), KIND_CONFORMANCE_FOCUS (a
# ginkgo focus instead of the whole suite, in one run; KIND_CONFORMANCE_SKIP a skip with it), KIND_CONFORMANCE_SERIAL (0: the non-[Serial] part only), KIND_LOG_DIR, KIND_REGISTRY_HOSTS (1: the nodes' containerd
# reads registry hosts from /etc/containerd/certs.d, which conformance needs; judge sets it), AGENT_VERBOSITY (the node agents' -v), KIND_RETAIN (keep the nodes
# of a failed create), KIND_IMAGE, NODELET_BIN, DEBIAN_SUITE, DEBIAN_MIRROR.
# Needs root, podman and mmdebstrap (hack/install-deps.sh kind installs them).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

NODE_AGENT=${NODE_AGENT:-nodelet}
CONTROL_PLANE_AGENT=${CONTROL_PLANE_AGENT:-$NODE_AGENT}
WORKER_AGENT=${WORKER_AGENT:-$NODE_AGENT}
WORKERS=${WORKERS:-2}
KIND_CLUSTER=${KIND_CLUSTER:-nodelet}
FLANNEL_VERSION=${FLANNEL_VERSION:-v0.28.10}
FLANNEL_IMAGE=docker.io/flannel/flannel:$FLANNEL_VERSION
BUSYBOX_IMAGE=docker.io/library/busybox:1.37
KIND_IMAGE=${KIND_IMAGE:-localhost/nodelet/kind-node}
NODELET_BIN=${NODELET_BIN:-$REPO_ROOT/bin/nodelet}
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
KIND_CACHE=$BIN_CACHE/kind-$KIND_VERSION
HYDROPHONE_VERSION=${HYDROPHONE_VERSION:-v0.8.0}
KIND_TEST_REGISTRY_PORT=${KIND_TEST_REGISTRY_PORT:-5061}
KIND_CONFORMANCE_PROCS=${KIND_CONFORMANCE_PROCS:-4}
KIND_LOG_DIR=${KIND_LOG_DIR:-/var/lib/nodelet-kind/logs}
# The packages of kind's base image (images/base/Dockerfile) that the nodes use; NFS, iSCSI and
# fuse-overlayfs (rootless) left out.
NODE_PACKAGES=systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,e2fsprogs,bash,ca-certificates,curl,jq,procps

# image_tag [AGENT]: the tag of the node image of AGENT (default NODE_AGENT).
image_tag() {
  case ${1:-$NODE_AGENT} in
    kubelet) echo "$KIND_IMAGE:$KUBE_VERSION" ;;
    nodelet) echo "$KIND_IMAGE:$KUBE_VERSION-nodelet" ;;
    *) die "node agent ${1:-$NODE_AGENT}: want nodelet or kubelet" ;;
  esac
}

# rootfs: the Debian tree of kind's base image, made once per suite and package list.
rootfs() {
  local key out
  key=$(printf '%s %s %s' "$DEBIAN_SUITE" "$NODE_PACKAGES" "$DEBIAN_MIRROR" | sha256sum | cut -c1-12)
  out=$KIND_CACHE/rootfs-$DEBIAN_SUITE-$key.tar
  if [ ! -s "$out" ]; then
    command -v mmdebstrap >/dev/null || die "mmdebstrap is missing (hack/install-deps.sh kind)"
    mkdir -p "$KIND_CACHE"
    log "making the $DEBIAN_SUITE rootfs with mmdebstrap into $out"
    mmdebstrap --variant=minbase --format=tar --include="$NODE_PACKAGES" \
      --dpkgopt='path-exclude=/usr/share/{doc,man,locale,info}/*' \
      "$DEBIAN_SUITE" "$out.tmp" "$DEBIAN_MIRROR" >&2
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}

# base_files DIR: kind's base image files (images/base/files of the kind module) and the steps of its
# Dockerfile, on the tree in DIR.
base_files() {
  local dir=$1 src
  src="$(mod_dir "sigs.k8s.io/kind@$KIND_VERSION")/images/base/files"
  install -d -m 0755 "$dir/kind" "$dir/kind/bin" "$dir/usr/local/bin" "$dir/etc/kubernetes/manifests" "$dir/opt/cni/bin"
  install -m 0755 "$src"/usr/local/bin/* "$dir/usr/local/bin/"
  install -m 0755 "$src"/kind/bin/* "$dir/kind/bin/"
  install -m 0644 "$src/etc/crictl.yaml" "$dir/etc/"
  install -D -m 0644 -t "$dir/etc/containerd" "$src"/etc/containerd/*
  install -D -m 0644 -t "$dir/etc/default" "$src"/etc/default/*
  install -D -m 0644 -t "$dir/etc/sysctl.d" "$src"/etc/sysctl.d/*
  find "$src/etc/systemd/system" -maxdepth 1 -type f -exec install -m 0644 -t "$dir/etc/systemd/system" {} +
  install -D -m 0644 -t "$dir/etc/systemd/system/kubelet.service.d" "$src"/etc/systemd/system/kubelet.service.d/*
  find "$dir/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$dir"/lib/systemd/system/multi-user.target.wants/* "$dir"/etc/systemd/system/*.wants/* \
    "$dir"/lib/systemd/system/local-fs.target.wants/* "$dir"/lib/systemd/system/sockets.target.wants/*udev* \
    "$dir"/lib/systemd/system/sockets.target.wants/*initctl* "$dir"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>"$dir/etc/systemd/journald.conf"
  ln -sf /usr/lib/systemd/systemd "$dir/sbin/init"
  systemctl --root="$dir" enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  systemctl --root="$dir" mask systemd-binfmt.service >/dev/null 2>&1
}

# runtime_files DIR: containerd, runc and the CNI plugins kind's base image carries. containerd and runc are
# the bed's (build-testbins.sh containerd2), the CNI plugins Debian's containernetworking-plugins.
runtime_files() {
  local dir=$1 b
  [ -x "$CONTAINERD2_BIN_DIR/containerd" ] || bash "$here/build-testbins.sh" containerd2 >&2
  for b in containerd ctr containerd-shim-runc-v2; do install -m 0755 "$CONTAINERD2_BIN_DIR/$b" "$dir/usr/local/bin/"; done
  install -D -m 0755 "$CONTAINERD2_BIN_DIR/runc" "$dir/usr/local/sbin/runc"
  for b in host-local loopback ptp portmap bridge; do
    [ -x "/usr/lib/cni/$b" ] || die "/usr/lib/cni/$b is missing (Debian's containernetworking-plugins)"
    install -m 0755 "/usr/lib/cni/$b" "$dir/opt/cni/bin/"
  done
  # kind's runtime spec: ctr's default with its product-files hook and no rlimits.
  "$CONTAINERD2_BIN_DIR/ctr" oci spec |
    jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
    jq 'del(.process.rlimits)' >"$dir/etc/containerd/cri-base.json"
}

# kube_files DIR: kind's node image steps: kubeadm, kubectl and the node agent in /usr/bin, /kind/version,
# kind's default storage manifest.
kube_files() {
  local dir=$1 b
  for b in kubelet kubeadm kubectl; do [ -x "$KUBE_BIN_DIR/$b" ] || bash "$here/build-testbins.sh" kind >&2; done
  install -m 0755 "$KUBE_BIN_DIR/kubeadm" "$KUBE_BIN_DIR/kubectl" "$dir/usr/bin/"
  case $NODE_AGENT in
    kubelet) install -m 0755 "$KUBE_BIN_DIR/kubelet" "$dir/usr/bin/kubelet" ;;
    nodelet)
      [ -x "$NODELET_BIN" ] || die "no nodelet binary at $NODELET_BIN (make build)"
      install -m 0755 "$NODELET_BIN" "$dir/usr/bin/kubelet" ;;
  esac
  printf '%s' "$KUBE_VERSION" >"$dir/kind/version"
  install -d -m 0755 "$dir/kind/manifests"
  kind_storage_manifest >"$dir/kind/manifests/default-storage.yaml"
}

# cluster_images: the images the node image carries: kubeadm's for KUBE_VERSION, the sandbox image of kind's
# containerd config, kind's default storage, and the pod network's.
cluster_images() {
  "$KUBE_BIN_DIR/kubeadm" config images list --kubernetes-version "$KUBE_VERSION" 2>/dev/null
  echo "registry.k8s.io/pause:3.10"
  kind_storage_manifest | sed -n 's/^ *image: *//p' | sort -u
  echo "$FLANNEL_IMAGE"
  echo "$BUSYBOX_IMAGE"
}

# image_version IMAGES NAME: the tag of registry.k8s.io/NAME in IMAGES.
image_version() { sed -n "s|^registry.k8s.io/$2:||p" <<<"$1"; }

# build_tools: hack/pause and hack/registry into KIND_CACHE/tools.
build_tools() {
  local tools=$KIND_CACHE/tools t
  mkdir -p "$tools"
  for t in pause registry; do
    (cd "$REPO_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$tools/$t" "./hack/$t") || die "go build ./hack/$t failed"
  done
}

# wait_registry ADDR: until the registry started as REGISTRY_PID answers on ADDR.
wait_registry() {
  local i
  for i in $(seq 300); do
    curl -m 2 -fs -o /dev/null "http://$1/v2/" && return 0
    kill -0 "$REGISTRY_PID" 2>/dev/null || { tail "$KIND_CACHE/registry.log" >&2; die "the image registry stopped"; }
    sleep 1
  done
  die "the image registry did not start on $1"
}

# serve_images: a registry of this bed's (hack/registry) on REGISTRY_ADDR with every cluster image, built from
# the binaries here; it stops with the script.
KIND_REGISTRY_ADDR=${KIND_REGISTRY_ADDR:-127.0.0.1:5060}
serve_images() {
  local images etcd coredns tools=$KIND_CACHE/tools
  images=$(cluster_images)
  etcd=$(image_version "$images" etcd) coredns=$(image_version "$images" coredns/coredns)
  [ -n "$etcd" ] && [ -n "$coredns" ] || die "kubeadm names no etcd or CoreDNS image: $images"
  local etcd_bin=$BIN_CACHE/etcd-v${etcd%-*}/etcd coredns_bin=$BIN_CACHE/coredns-$coredns/coredns
  [ -x "$etcd_bin" ] || ETCD_VERSION=v${etcd%-*} bash "$here/build-testbins.sh" etcd >&2
  [ -x "$coredns_bin" ] || bash "$here/build-testbins.sh" coredns "$coredns" >&2
  local csi; csi=$(csi_bin_dir)
  [ -x "$csi/local-path-provisioner" ] || bash "$here/build-testbins.sh" csi >&2
  [ -x "$BUSYBOX_BIN_DIR/busybox" ] || bash "$here/build-testbins.sh" busybox >&2
  local flannel_bin=$BIN_CACHE/flannel-$FLANNEL_VERSION/flanneld
  [ -x "$flannel_bin" ] || bash "$here/build-testbins.sh" flannel "$FLANNEL_VERSION" >&2
  build_tools
  "$tools/registry" --quiet --addr "$KIND_REGISTRY_ADDR" --busybox "$BUSYBOX_BIN_DIR/busybox" --pause "$tools/pause" \
    --csi-bin "$csi" --kube-bin "$KUBE_BIN_DIR" --kube-version "$KUBE_VERSION" --kube-proxy-base "$(rootfs)" \
    --etcd "$etcd_bin" --etcd-tag "$etcd" --coredns "$coredns_bin" --coredns-tag "$coredns" \
    --flannel "$flannel_bin" --flannel-tag "$FLANNEL_VERSION" >"$KIND_CACHE/registry.log" 2>&1 &
  REGISTRY_PID=$!
  wait_registry "$KIND_REGISTRY_ADDR"
}

# preload TAG: the cluster images in the node image's containerd (content only, pinned, as kind's node image
# build leaves them), fetched from serve_images' registry by a containerd run in a container of the image.
preload() {
  local tag=$1 name=nodelet-kind-build img i
  serve_images
  podman rm -f "$name" >/dev/null 2>&1 || true
  podman run -d --name "$name" --network host --privileged --entrypoint /bin/sleep "$tag" infinity >/dev/null
  podman exec "$name" bash -c 'nohup containerd >/dev/null 2>&1 &'
  for i in $(seq 30); do podman exec "$name" ctr version >/dev/null 2>&1 && break; sleep 1; done
  for host in registry.k8s.io docker.io; do
    podman exec "$name" bash -c "mkdir -p /tmp/hosts/$host && printf 'server = \"http://$KIND_REGISTRY_ADDR\"\n[host.\"http://$KIND_REGISTRY_ADDR\"]\n  capabilities = [\"pull\", \"resolve\"]\n' > /tmp/hosts/$host/hosts.toml"
  done
  for img in $(cluster_images); do
    log "preloading $img"
    podman exec "$name" ctr -n k8s.io content fetch --hosts-dir /tmp/hosts --platform linux/amd64 "$img" >/dev/null 2>&1 ||
      die "fetching $img from $KIND_REGISTRY_ADDR failed"
    podman exec "$name" ctr -n k8s.io images label "$img" io.cri-containerd.pinned=pinned >/dev/null 2>&1
  done
  podman exec "$name" pkill containerd
  for i in $(seq 30); do podman exec "$name" pgrep containerd >/dev/null 2>&1 || break; sleep 1; done
  podman exec "$name" rm -rf /tmp/hosts
  podman commit -q --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' "$name" "$tag" >/dev/null
  podman rm -f "$name" >/dev/null
  kill "$REGISTRY_PID" 2>/dev/null || true
}

build_image() {
  local tag tree tar
  kind_host # preload runs a container of the image
  tag=$(image_tag)
  tar=$(rootfs)
  tree=$(mktemp -d /var/tmp/kind-node.XXXXXX)
  trap 'rm -rf "$tree"; trap - RETURN' RETURN
  tar -C "$tree" -xf "$tar"
  base_files "$tree"
  runtime_files "$tree"
  kube_files "$tree"
  log "importing $tag into podman"
  tar -C "$tree" -c . | podman import \
    --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
    --change 'ENV container=docker' --change 'STOPSIGNAL SIGRTMIN+3' - "$tag" >/dev/null 2>&1
  preload "$tag"
  podman image prune -f >/dev/null 2>&1 || true # the tag's previous image
  log "built $tag"
}

# kind_host: what kind's podman provider takes from the host. It mounts /lib/modules into every node, which
# a machine whose kernel has no modules directory lacks; podman's default ulimits ask runc for more than a
# machine without CAP_SYS_RESOURCE may have (podman caps nproc at 32768 for itself, then asks its
# containers' default), so containers.conf sets them to what it can have. podman also gives every container
# on a network with DNS the search domain dns.podman, which the nodes pass on to their pods: a name tried in
# it reaches aardvark-dns, which answers TCP queries with SERVFAIL, and a resolver stops at that (the DNS
# conformance specs' `dig +tcp +search`). dns_searches "." leaves podman's domain out, as Docker's kind
# nodes have none of Docker's.
kind_host() {
  [ -d /lib/modules ] || install -d -m 0755 /lib/modules
  local conf=/etc/containers/containers.conf
  install -d /etc/containers
  grep -qs '^\[containers\]' "$conf" || printf '[containers]\n' >>"$conf"
  if ! grep -qs '^default_ulimits' "$conf"; then
    sed -i "/^\[containers\]/a default_ulimits = [\"nofile=$(ulimit -Hn):$(ulimit -Hn)\", \"nproc=32768:32768\"]" "$conf"
    log "set podman's default ulimits in $conf"
  fi
  if ! grep -qs '^dns_searches' "$conf"; then
    sed -i '/^\[containers\]/a dns_searches = ["."]' "$conf"
    log "left podman's DNS search domain out in $conf"
  fi
}

# boot: one node of the image, as kind runs it (privileged, its own cgroup namespace, tmpfs /run and /tmp),
# up to containerd answering.
boot() {
  local tag name=nodelet-kind-boot i
  tag=$(image_tag)
  podman rm -f "$name" >/dev/null 2>&1 || true
  kind_host
  podman run -d --name "$name" --privileged --cgroupns=private --tmpfs /run --tmpfs /tmp \
    --security-opt seccomp=unconfined --security-opt apparmor=unconfined -v /lib/modules:/lib/modules:ro \
    "$tag" >/dev/null
  trap 'podman rm -f "$name" >/dev/null 2>&1 || true; trap - RETURN' RETURN
  for i in $(seq 60); do
    if podman exec "$name" ctr version >/dev/null 2>&1; then
      log "node up: $(podman exec "$name" systemctl is-system-running 2>/dev/null || true), containerd $(podman exec "$name" ctr version 2>/dev/null | awk '/Version/ { v = $2 } END { print v }')"
      return 0
    fi
    sleep 1
  done
  podman logs "$name" | tail -30 >&2
  die "containerd did not come up in $tag within 60 s"
}

# kind_bin: kind from the module proxy.
kind_bin() {
  local out=$BIN_CACHE/kind-$KIND_VERSION/kind
  if [ ! -x "$out" ]; then
    log "building kind $KIND_VERSION into $out"
    GOBIN=$(dirname "$out") go install "sigs.k8s.io/kind@$KIND_VERSION" >&2 || die "go install sigs.k8s.io/kind@$KIND_VERSION failed"
  fi
  echo "$out"
}

# has_sys_resource: whether this machine's bounding set has CAP_SYS_RESOURCE (bit 24).
has_sys_resource() {
  local bnd
  bnd=$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)
  (( (16#$bnd >> 24) & 1 ))
}

# cluster_config: kind's config of the cluster: one control plane and WORKERS workers, each with its agent's
# image; no default CNI (the pod network is hack/kind/flannel.yaml); and what this machine needs: on cgroup
# v1, the kubelet's failCgroupV1 off; without CAP_SYS_RESOURCE, containerd keeps pods' oom_score_adj at or
# above its own (restrict_oom_score_adj, as kind does for rootless nodes), since it cannot lower it.
cluster_config() {
  local i
  printf 'kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworking:\n  disableDefaultCNI: true\nnodes:\n'
  printf -- '- role: control-plane\n  image: %s\n' "$(image_tag "$CONTROL_PLANE_AGENT")"
  for i in $(seq "$WORKERS"); do
    printf -- '- role: worker\n  image: %s\n' "$(image_tag "$WORKER_AGENT")"
  done
  if ! has_sys_resource; then
    printf 'containerdConfigPatches:\n- |-\n  [plugins."io.containerd.grpc.v1.cri"]\n    restrict_oom_score_adj = true\n'
  fi
  # KIND_REGISTRY_HOSTS=1: registry hosts from /etc/containerd/certs.d (conformance points registry.k8s.io at the
  # test images there).
  if [ "${KIND_REGISTRY_HOSTS:-0}" = 1 ]; then
    has_sys_resource && printf 'containerdConfigPatches:\n'
    printf -- '- |-\n  [plugins."io.containerd.grpc.v1.cri".registry]\n    config_path = "/etc/containerd/certs.d"\n'
  fi
  local patches=()
  if [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
    patches+=('  kind: KubeletConfiguration\n  failCgroupV1: false\n')
  fi
  local init_args='' join_args=''
  if [ -n "${AGENT_VERBOSITY:-}" ]; then
    init_args="    - name: v\n      value: \"$AGENT_VERBOSITY\"\n" join_args=$init_args
  fi
  # KIND_TAKEOVER=1: the workers' kubelets hand their node over to whoever takes their lock file
  # (deploy/kind/kind-config.yaml).
  if [ "${KIND_TAKEOVER:-0}" = 1 ]; then
    join_args+="    - name: lock-file\n      value: /var/run/kubelet.lock\n    - name: exit-on-lock-contention\n      value: \"true\"\n"
  fi
  [ -z "$init_args" ] || patches+=("  kind: InitConfiguration\n  nodeRegistration:\n    kubeletExtraArgs:\n$init_args")
  [ -z "$join_args" ] || patches+=("  kind: JoinConfiguration\n  nodeRegistration:\n    kubeletExtraArgs:\n$join_args")
  [ ${#patches[@]} -gt 0 ] || return 0
  printf 'kubeadmConfigPatches:\n'
  for i in "${patches[@]}"; do printf -- "- |\n$i"; done
}

# kind_kubectl: kubectl on the cluster's context, wherever kind left it.
kind_kubectl() { "$KUBE_BIN_DIR/kubectl" --context "kind-$KIND_CLUSTER" "$@"; }

# elapsed FROM TO: seconds between two `date +%s.%N` readings, one decimal.
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

up() {
  local kind config start created ready subnet t
  kind=$(kind_bin)
  kind_host
  for t in "$(image_tag "$CONTROL_PLANE_AGENT")" "$(image_tag "$WORKER_AGENT")"; do
    podman image exists "$t" || die "no node image $t (hack/kind.sh image)"
  done
  config=$(mktemp)
  trap 'rm -f "$config"; trap - RETURN' RETURN
  cluster_config >"$config"
  log "creating kind cluster $KIND_CLUSTER: control plane $CONTROL_PLANE_AGENT, $WORKERS workers $WORKER_AGENT"
  start=$(date +%s.%N)
  KIND_EXPERIMENTAL_PROVIDER=podman "$kind" create cluster --name "$KIND_CLUSTER" --config "$config" ${KIND_RETAIN:+--retain} >&2
  created=$(date +%s.%N)
  subnet=$(kind_kubectl get cm -n kube-system kubeadm-config -o jsonpath='{.data.ClusterConfiguration}' | sed -n 's/^ *podSubnet: *//p')
  [ -n "$subnet" ] || die "no podSubnet in kubeadm's ClusterConfiguration"
  sed -e "s|POD_SUBNET|$subnet|" -e "s|FLANNEL_IMAGE|$FLANNEL_IMAGE|" -e "s|BUSYBOX_IMAGE|$BUSYBOX_IMAGE|" \
    "$here/kind/flannel.yaml" | kind_kubectl apply -f - >/dev/null
  kind_kubectl wait --for=condition=Ready nodes --all --timeout=300s >/dev/null || die "nodes not Ready within 300 s"
  ready=$(date +%s.%N)
  log "cluster $KIND_CLUSTER: kind create $(elapsed "$start" "$created") s; all $((WORKERS + 1)) nodes Ready $(elapsed "$start" "$ready") s after it began"
}

down() {
  KIND_EXPERIMENTAL_PROVIDER=podman "$(kind_bin)" delete cluster --name "$KIND_CLUSTER" >&2
}

# smoke: the Deployment of hack/kind/smoke.yaml over every worker, then a client pod on the control plane that
# reaches the Service by its DNS name until every replica has answered (kube-proxy, cluster DNS and pod
# traffic between nodes); everything removed after.
smoke() {
  local replicas answers
  replicas=$(kind_kubectl get nodes -l '!node-role.kubernetes.io/control-plane' -o name | grep -c .)
  [ "$replicas" -gt 0 ] || die "no worker nodes"
  sed -e "s|BUSYBOX_IMAGE|$BUSYBOX_IMAGE|" -e "s|REPLICAS|$replicas|" "$here/kind/smoke.yaml" | kind_kubectl apply -f - >/dev/null
  trap 'kind_kubectl delete -f "$here/kind/smoke.yaml" --ignore-not-found --wait=false >/dev/null 2>&1; kind_kubectl delete pod smoke-client --ignore-not-found --wait=false >/dev/null 2>&1; trap - RETURN' RETURN
  kind_kubectl rollout status deployment/smoke-web --timeout=120s >/dev/null || die "smoke-web did not roll out"
  log "smoke-web: $(kind_kubectl get pods -l app=smoke-web -o jsonpath='{range .items[*]}{.metadata.name} on {.spec.nodeName}, {end}')"
  # The client asks until it has heard from every replica, or gives up after 60 tries.
  kind_kubectl run smoke-client --image="$BUSYBOX_IMAGE" --restart=Never \
    --overrides='{"spec":{"tolerations":[{"operator":"Exists"}],"nodeSelector":{"node-role.kubernetes.io/control-plane":""}}}' \
    --command -- sh -c "seen=''; for i in \$(seq 60); do a=\$(wget -qO- -T 2 http://smoke-web.default.svc.cluster.local/) || { sleep 1; continue; }; case \"\$seen\" in *\"\$a\"*) ;; *) seen=\"\$seen\$a
\"; echo \"\$a\";; esac; [ \$(printf %s \"\$seen\" | grep -c .) -ge $replicas ] && exit 0; done; exit 1" >/dev/null
  if ! kind_kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/smoke-client --timeout=120s >/dev/null; then
    kind_kubectl logs smoke-client >&2 || true
    die "the client did not reach every smoke-web replica through the Service"
  fi
  answers=$(kind_kubectl logs smoke-client)
  log "smoke passed: the client on the control plane reached all $replicas replicas through smoke-web.default.svc.cluster.local:"
  printf '%s\n' "$answers" | sed 's/^/    /' >&2
}

# wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds, once a second; dies after SECONDS.
wait_for() {
  local limit=$1 what=$2 start=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $((SECONDS - start)) -lt "$limit" ] || die "$what: not within $limit s"
    sleep 1
  done
}
not() { ! "$@"; }
node_ready() { [ "$(kind_kubectl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
node_tainted() { kind_kubectl get node "$1" -o jsonpath='{range .spec.taints[*]}{.key}{"\n"}{end}' | grep -qxF "$2"; }
pod_terminating() { [ -n "$(kind_kubectl get "$1" -o jsonpath='{.metadata.deletionTimestamp}')" ]; }
# running_on NODE ID: whether containerd on NODE runs a task of container ID.
running_on() { podman exec "$1" ctr -n k8s.io tasks ls 2>/dev/null | awk -v id="$2" '$1 == id && $3 == "RUNNING" { found = 1 } END { exit !found }'; }
pod_gone() { [ -z "$(kind_kubectl get "$1" --ignore-not-found -o name)" ]; }
web_ready() { [ "$(kind_kubectl get deployment multinode-web -o jsonpath='{.status.readyReplicas}')" = "$1" ]; }
# pods_on APP NODE: the pods of APP on NODE that are not being deleted, one line each: name, container ID,
# restart count.
pods_on() {
  kind_kubectl get pods -l "app=$1" --field-selector "spec.nodeName=$2" \
    -o jsonpath='{range .items[*]}{.metadata.name}|{.metadata.deletionTimestamp}|{.status.containerStatuses[0].containerID}|{.status.containerStatuses[0].restartCount}{"\n"}{end}' |
    awk -F'|' '$2 == "" { print $1, $3, $4 }'
}

# multinode: what a cluster of several nodes does that one node never shows, checked on the cluster
# (hack/kind/multinode.yaml): a DaemonSet runs a pod on every node; a Deployment spreads over the workers;
# a worker whose node agent stops goes NotReady, is tainted unreachable, its pods are evicted (they tolerate it
# for 10 s) and replaced on another worker, and when the agent is back the node is Ready, untainted, the
# evicted pods' containers are gone from it and its DaemonSet pod kept its container; `kubectl drain` of the
# other worker moves its pods off it and leaves its DaemonSet pod. Prints the times each step took.
multinode() {
  local workers replicas nodes worker other before after evicted cid t0 t_notready t_taint t_evict t_replaced t_ready t_gone
  workers=$(kind_kubectl get nodes -l '!node-role.kubernetes.io/control-plane' -o jsonpath='{.items[*].metadata.name}')
  replicas=$(wc -w <<<"$workers")
  [ "$replicas" -ge 2 ] || die "multinode needs two workers or more, the cluster has $replicas"
  nodes=$(kind_kubectl get nodes -o name | grep -c .)
  worker=${workers%% *} other=$(cut -d' ' -f2 <<<"$workers")
  sed -e "s|BUSYBOX_IMAGE|$BUSYBOX_IMAGE|" -e "s|REPLICAS|$replicas|" "$here/kind/multinode.yaml" | kind_kubectl apply -f - >/dev/null
  trap 'kind_kubectl uncordon "$other" >/dev/null 2>&1; kind_kubectl delete -f "$here/kind/multinode.yaml" --ignore-not-found --wait=false >/dev/null 2>&1; trap - RETURN' RETURN
  kind_kubectl rollout status daemonset/multinode-ds --timeout=180s >/dev/null || die "multinode-ds did not roll out"
  kind_kubectl rollout status deployment/multinode-web --timeout=180s >/dev/null || die "multinode-web did not roll out"
  [ "$(kind_kubectl get pods -l app=multinode-ds --field-selector status.phase=Running -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | grep -c .)" = "$nodes" ] ||
    die "multinode-ds: not a Running pod on each of the $nodes nodes"
  log "DaemonSet: a Running pod on each of the $nodes nodes"
  [ "$(kind_kubectl get pods -l app=multinode-web -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | grep -c .)" = "$replicas" ] ||
    die "multinode-web: $replicas replicas not spread over the $replicas workers"
  log "topology spread: multinode-web has one replica on each of the $replicas workers"

  before=$(pods_on multinode-ds "$worker")
  evicted=pod/$(pods_on multinode-web "$worker" | cut -d' ' -f1)
  cid=$(pods_on multinode-web "$worker" | cut -d' ' -f2) cid=${cid#*://}
  log "stopping the node agent of $worker ($evicted runs there)"
  t0=$SECONDS
  podman exec "$worker" systemctl stop kubelet
  wait_for 180 "$worker NotReady" not node_ready "$worker"
  t_notready=$((SECONDS - t0))
  wait_for 60 "$worker tainted unreachable" node_tainted "$worker" node.kubernetes.io/unreachable
  t_taint=$((SECONDS - t0))
  wait_for 60 "$evicted evicted" pod_terminating "$evicted"
  t_evict=$((SECONDS - t0))
  wait_for 120 "multinode-web replaced on another worker" web_ready "$replicas"
  t_replaced=$((SECONDS - t0))
  running_on "$worker" "$cid" || die "$evicted's container stopped while the agent was away"
  log "$worker NotReady after ${t_notready} s, tainted unreachable after ${t_taint} s, $evicted evicted after ${t_evict} s (its container runs on: nobody can stop it), its replacement ready after ${t_replaced} s"
  t0=$SECONDS
  podman exec "$worker" systemctl start kubelet
  wait_for 120 "$worker Ready again" node_ready "$worker"
  t_ready=$((SECONDS - t0))
  wait_for 60 "$worker untainted" not node_tainted "$worker" node.kubernetes.io/unreachable
  wait_for 120 "$evicted deleted" pod_gone "$evicted"
  t_gone=$((SECONDS - t0))
  ! running_on "$worker" "$cid" || die "$evicted's container still runs on $worker"
  after=$(pods_on multinode-ds "$worker")
  [ "$before" = "$after" ] || die "the DaemonSet pod of $worker changed while its agent was away: '$before' then '$after'"
  log "agent of $worker started: Ready and untainted after ${t_ready} s, $evicted stopped and deleted after ${t_gone} s, the DaemonSet pod kept its container ($(cut -d' ' -f2 <<<"$after" | cut -c1-25)…, restarts $(cut -d' ' -f3 <<<"$after"))"

  before=$(pods_on multinode-ds "$other")
  t0=$SECONDS
  kind_kubectl drain "$other" --ignore-daemonsets --delete-emptydir-data --timeout=180s >/dev/null || die "kubectl drain $other failed"
  wait_for 120 "multinode-web ready off $other" web_ready "$replicas"
  [ -z "$(pods_on multinode-web "$other")" ] || die "multinode-web still has pods on the drained $other"
  after=$(pods_on multinode-ds "$other")
  [ "$before" = "$after" ] || die "kubectl drain changed the DaemonSet pod of $other: '$before' then '$after'"
  log "kubectl drain $other: its pods moved off it, multinode-web ready on the other workers after $((SECONDS - t0)) s, the DaemonSet pod stayed"
  kind_kubectl uncordon "$other" >/dev/null
  log "multinode passed"
}

# worker_containers WORKERS: every container of the pods on WORKERS but nodelet's own, a line each: the pod,
# its node, then each container's ID and restart count.
worker_containers() {
  kind_kubectl get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.spec.nodeName}{range .status.containerStatuses[*]} {.containerID} {.restartCount}{end}{"\n"}{end}' |
    awk -v w="$1" 'BEGIN { n = split(w, a, " "); for (i = 1; i <= n; i++) on[a[i]] = 1 } ($2 in on) && $1 !~ /^nodelet-system\// { print }' | sort
}
agent_is_nodelet() { node_ready "$1" && kind_kubectl get node "$1" -o jsonpath='{.status.nodeInfo.kubeletVersion}' | grep -q nodelet; }

# takeover: docs/deploy.md's DaemonSet takeover on a cluster of kubelet nodes whose workers' kubelets take
# --lock-file and --exit-on-lock-contention (KIND_TAKEOVER=1): nodelet's image (make image) loaded with kind
# load, deploy/kind applied; every worker must be handed to nodelet with no container restarted (each container
# of each pod on the workers keeps its ID and restart count), and the smoke check passes after. The cluster is
# left up, its workers run by nodelet (hack/kind.sh conformance runs the suite on it).
takeover() {
  local kind workers w before after start tar=$REPO_ROOT/bin/nodelet-image.tar
  kind=$(kind_bin)
  (cd "$REPO_ROOT" && make -s image IMAGE_TAG=nodelet:dev >/dev/null) || die "make image failed"
  down >/dev/null 2>&1 || true
  KIND_TAKEOVER=1 KIND_REGISTRY_HOSTS=1 CONTROL_PLANE_AGENT=kubelet WORKER_AGENT=kubelet up
  KIND_EXPERIMENTAL_PROVIDER=podman "$kind" load image-archive "$tar" --name "$KIND_CLUSTER" >&2 || die "kind load image-archive failed"
  workers=$(kind_kubectl get nodes -l '!node-role.kubernetes.io/control-plane' -o jsonpath='{.items[*].metadata.name}')
  sed -e "s|BUSYBOX_IMAGE|$BUSYBOX_IMAGE|" -e "s|REPLICAS|$(wc -w <<<"$workers")|" "$here/kind/smoke.yaml" | kind_kubectl apply -f - >/dev/null
  kind_kubectl rollout status deployment/smoke-web --timeout=120s >/dev/null || die "smoke-web did not roll out"
  before=$(mktemp) after=$(mktemp)
  trap 'rm -f "$before" "$after"; trap - RETURN' RETURN
  worker_containers "$workers" >"$before"
  log "kubelet workers $workers: $(grep -c . "$before") pods; applying deploy/kind"
  start=$SECONDS
  kind_kubectl apply -k "$REPO_ROOT/deploy/kind" >/dev/null
  for w in $workers; do wait_for 300 "$w run by nodelet" agent_is_nodelet "$w"; done
  log "every worker Ready under nodelet $((SECONDS - start)) s after deploy/kind was applied"
  kind_kubectl rollout status deployment/smoke-web --timeout=120s >/dev/null || die "smoke-web not ready under nodelet"
  worker_containers "$workers" >"$after"
  if ! diff "$before" "$after" >&2; then
    die "takeover: containers on the workers differ (above)"
  fi
  log "takeover: no container restarted ($(awk '{ n += (NF - 2) / 2 } END { print n }' "$after") containers of $(grep -c . "$after") pods kept their IDs and restart counts)"
  smoke
}

# hydrophone_bin: SIG Testing's conformance runner, from the module proxy.
hydrophone_bin() {
  local out=$BIN_CACHE/hydrophone-$HYDROPHONE_VERSION/hydrophone
  if [ ! -x "$out" ]; then
    log "building hydrophone $HYDROPHONE_VERSION into $out"
    GOBIN=$(dirname "$out") go install "sigs.k8s.io/hydrophone@$HYDROPHONE_VERSION" >&2 ||
      die "go install sigs.k8s.io/hydrophone@$HYDROPHONE_VERSION failed"
  fi
  echo "$out"
}

# serve_test_images: the upstream e2e test images and the conformance image (e2e.test, ginkgo, kubectl and
# go-runner on the kube-proxy tree, upstream's layout) from a registry of the bed's on the kind network's
# gateway; every node's containerd takes registry.k8s.io and docker.io from it (hosts.toml). Sets TEST_REGISTRY.
serve_test_images() {
  local gw node host tools=$KIND_CACHE/tools
  gw=$(podman network inspect kind --format '{{range .Subnets}}{{.Gateway}} {{end}}' | tr ' ' '\n' | grep -v ':' | grep . | head -n 1)
  [ -n "$gw" ] || die "no IPv4 gateway on podman's kind network"
  TEST_REGISTRY=$gw:$KIND_TEST_REGISTRY_PORT
  bash "$here/build-testbins.sh" e2e >&2
  bash "$here/build-testbins.sh" gorunner >&2
  bash "$here/build-testbins.sh" sampleapiserver >&2
  [ -x "$BUSYBOX_BIN_DIR/busybox" ] || bash "$here/build-testbins.sh" busybox >&2
  build_tools
  log "serving the e2e test images and registry.k8s.io/conformance:$KUBE_VERSION on $TEST_REGISTRY"
  "$tools/registry" --quiet --addr "$TEST_REGISTRY" --busybox "$BUSYBOX_BIN_DIR/busybox" --pause "$tools/pause" \
    --e2e-bin "$E2E_BIN_DIR" --agnhost-src "$(go env GOMODCACHE)/k8s.io/kubernetes@$KUBE_VERSION/test/images/agnhost" \
    --conformance-bin "$E2E_BIN_DIR" --kubectl "$KUBE_BIN_DIR/kubectl" --kube-version "$KUBE_VERSION" \
    --kube-proxy-base "$(rootfs)" >"$KIND_CACHE/registry.log" 2>&1 &
  REGISTRY_PID=$!
  wait_registry "$TEST_REGISTRY"
  for node in $(KIND_EXPERIMENTAL_PROVIDER=podman "$(kind_bin)" get nodes --name "$KIND_CLUSTER"); do
    for host in registry.k8s.io docker.io; do
      podman exec "$node" sh -c "mkdir -p /etc/containerd/certs.d/$host && printf '%s\n' 'server = \"http://$TEST_REGISTRY\"' '[host.\"http://$TEST_REGISTRY\"]' '  capabilities = [\"pull\", \"resolve\"]' > /etc/containerd/certs.d/$host/hosts.toml"
    done
  done
}

# hydrophone_run NAME ARGS...: one hydrophone run into OUT/NAME (the suite's e2e.log and junit_01.xml, which
# hydrophone fetches from the conformance pod before its clean-up), summarised with its passed specs listed.
hydrophone_run() {
  local name=$1 dir=$OUT/$1 rc=0
  shift
  mkdir -p "$dir"
  log "hydrophone ($name): $*"
  "$HYDROPHONE" --kubeconfig "$KUBECONFIG_FILE" --conformance-image "registry.k8s.io/conformance:$KUBE_VERSION" \
    --busybox-image registry.k8s.io/e2e-test-images/busybox:1.36.1-1 --output-dir "$dir" "$@" \
    >"$dir/hydrophone.log" 2>&1 || rc=$?
  log "hydrophone ($name) exited $rc"
  [ -s "$dir/junit_01.xml" ] || { tail -n 20 "$dir/hydrophone.log" >&2; log "warning: no JUnit report ($name)"; return 0; }
  "$E2E_BIN_DIR/conformance-report" -list-passed "$dir/passed.txt" "$dir/junit_01.xml" >"$dir/summary.txt" || true
  tail -n 1 "$dir/summary.txt" >&2
}

# conformance: the CNCF conformance suite on the cluster through hydrophone, with upstream's conformance image
# built here: the [Conformance] specs but the [Serial] ones in KIND_CONFORMANCE_PROCS processes, then the
# [Serial] ones alone. Reports under KIND_LOG_DIR/conformance-<agents>-<time>/ (parallel/ and serial/, each
# with e2e.log, junit_01.xml, report.json and passed.txt; passed.txt of both together).
conformance() {
  local agents start
  HYDROPHONE=$(hydrophone_bin)
  (cd "$REPO_ROOT" && go build -o "$E2E_BIN_DIR/conformance-report" ./hack/conformance-report) ||
    die "go build ./hack/conformance-report failed"
  kind_kubectl get nodes >/dev/null || die "no kind cluster $KIND_CLUSTER (hack/kind.sh up)"
  agents=$CONTROL_PLANE_AGENT-$WORKER_AGENT
  [ "$CONTROL_PLANE_AGENT" = "$WORKER_AGENT" ] && agents=$WORKER_AGENT
  OUT=$KIND_LOG_DIR/conformance-$agents-$(date +%Y%m%d-%H%M%S)
  mkdir -p "$OUT"
  KUBECONFIG_FILE=$OUT/kubeconfig
  KIND_EXPERIMENTAL_PROVIDER=podman "$(kind_bin)" get kubeconfig --name "$KIND_CLUSTER" >"$KUBECONFIG_FILE"
  serve_test_images
  start=$SECONDS
  if [ -n "${KIND_CONFORMANCE_FOCUS:-}" ]; then
    hydrophone_run focus --focus "$KIND_CONFORMANCE_FOCUS" ${KIND_CONFORMANCE_SKIP:+--skip "$KIND_CONFORMANCE_SKIP"} \
      --parallel "$KIND_CONFORMANCE_PROCS"
  else
    hydrophone_run parallel --conformance --skip '\[Serial\]' --parallel "$KIND_CONFORMANCE_PROCS"
    [ "${KIND_CONFORMANCE_SERIAL:-1}" = 0 ] ||
      hydrophone_run serial --focus '\[Conformance\].*\[Serial\]|\[Serial\].*\[Conformance\]'
  fi
  cat "$OUT"/*/passed.txt 2>/dev/null | sort -u >"$OUT/passed.txt"
  log "conformance on $KIND_CLUSTER ($agents nodes): $(grep -c . "$OUT/passed.txt" || true) specs passed in $(((SECONDS - start) / 60)) min; reports in $OUT"
}

# judge: for each agent of KIND_AGENTS (default "nodelet kubelet"), a new cluster of its nodes (the image built
# when missing), the conformance suite on it, the cluster deleted; then the passed lists compared.
judge() {
  local agent runs=() latest
  for agent in ${KIND_AGENTS:-nodelet kubelet}; do
    podman image exists "$(image_tag "$agent")" || NODE_AGENT=$agent build_image
    down >/dev/null 2>&1 || true
    KIND_REGISTRY_HOSTS=1 CONTROL_PLANE_AGENT=$agent WORKER_AGENT=$agent up
    CONTROL_PLANE_AGENT=$agent WORKER_AGENT=$agent conformance
    kill "$REGISTRY_PID" 2>/dev/null || true
    REGISTRY_PID=
    down
    latest=$OUT/passed.txt
    runs+=("$latest")
  done
  [ ${#runs[@]} -eq 2 ] || return 0
  log "passed by one cluster and not the other:"
  "$E2E_BIN_DIR/conformance-report" -compare "${runs[@]}" >&2 || true
}

REGISTRY_PID=
trap '[ -z "$REGISTRY_PID" ] || kill "$REGISTRY_PID" 2>/dev/null || true' EXIT

case "${1:-}" in
  image) build_image ;;
  up) up ;;
  down) down ;;
  smoke) smoke ;;
  multinode) multinode ;;
  takeover) takeover ;;
  boot) boot ;;
  conformance) conformance ;;
  judge) judge ;;
  *) die "usage: hack/kind.sh image|up|down|smoke|multinode|takeover|boot|conformance|judge" ;;
esac
