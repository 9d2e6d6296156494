#!/usr/bin/env bash
# Storage on the test bed, from upstream's own manifests and the bed registry's storage images:
#   - the CSI hostpath driver (hostpath.csi.k8s.io) as the e2e suite deploys it (test/e2e/storage/drivers/csi.go,
#     InitHostPathCSIDriver: the sidecars' RBAC, the CSIDriver and the plugin StatefulSet from
#     test/e2e/testing-manifests/storage-csi, without the health monitor and snapshot metadata containers, as the
#     suite leaves them out), in namespace default, with a StorageClass csi-hostpath-sc and a VolumeSnapshotClass;
#   - the volume snapshot CRDs and snapshot controller of external-snapshotter;
#   - kind's default storage: the local-path provisioner in local-path-storage with the default StorageClass
#     "standard" (sigs.k8s.io/kind pkg/build/nodeimage/const_storage.go).
#
#   storage.sh up | down | status
#
# The bed must be up with AGENT_ROOT=/var/lib/kubelet (the manifests hard-code the kubelet's folders) and its
# registry serving the storage images (hack/build-testbins.sh csi before the registry starts). Settings: BED_DIR
# (default /var/lib/nodelet-bed), BIN_CACHE, NODE_NAME. Run as root.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

BED_DIR=${BED_DIR:-/var/lib/nodelet-bed}
NODE_NAME=${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}
REGISTRY_ADDR=127.0.0.1:5050
KUBELET_ROOT=/var/lib/kubelet
CSI_DRIVER=hostpath.csi.k8s.io
# The host folders the manifests keep volumes in (hostPath volumes of the plugin and the local-path helper).
DATA_DIRS=(/var/lib/csi-hostpath-data /var/local-path-provisioner)
# What InitHostPathCSIDriver deploys, in its order (relative to storage-csi/).
HOSTPATH_MANIFESTS=(
  external-attacher/rbac.yaml
  external-provisioner/rbac.yaml
  external-snapshot-metadata/rbac.yaml
  external-snapshotter/csi-snapshotter/rbac-csi-snapshotter.yaml
  external-health-monitor/external-health-monitor-controller/rbac.yaml
  external-resizer/rbac.yaml
  hostpath/hostpath/csi-hostpath-driverinfo.yaml
  hostpath/hostpath/csi-hostpath-plugin.yaml
  hostpath/hostpath/e2e-test-rbac.yaml
)
# The plugin's containers and volumes the suite removes before it creates the StatefulSet.
SUITE_DROPS='["csi-external-health-monitor-controller", "csi-snapshot-metadata", "csi-snapshot-metadata-server-certs"]'

kubectl() { "$KUBE_BIN_DIR/kubectl" --kubeconfig "$BED_DIR/pki/admin.kubeconfig" "$@"; }

manifests_dir() { echo "$(mod_dir "k8s.io/kubernetes@$KUBE_VERSION")/test/e2e/testing-manifests/storage-csi"; }

# check_bed: the API server answers, the agent runs with the kubelet's root folder, the registry has the images.
check_bed() {
  local pid root
  [ "$(id -u)" -eq 0 ] || die "storage.sh needs root"
  kubectl get --raw /readyz >/dev/null 2>&1 || die "the bed in $BED_DIR is not up (hack/bed.sh up)"
  pid=$(cat "$BED_DIR/pids/nodelet.pid" 2>/dev/null) || die "the bed's node agent is not running"
  root=$(tr '\0' '\n' < "/proc/$pid/cmdline" | sed -n '/^--root-dir$/{n;p;q}')
  [ "$root" = "$KUBELET_ROOT" ] ||
    die "the node agent runs with --root-dir $root; the CSI manifests need $KUBELET_ROOT (bed.sh up with AGENT_ROOT=$KUBELET_ROOT)"
  curl -fs -o /dev/null "http://$REGISTRY_ADDR/v2/sig-storage/hostpathplugin/manifests/v1.17.1" ||
    die "the registry does not serve the storage images: hack/build-testbins.sh csi, then bed.sh stop registry; bed.sh start registry"
}

# hostpath_objects: the suite's manifests as a stream of JSON objects, the plugin StatefulSet without the containers and
# volumes the suite drops.
hostpath_objects() {
  local dir f files=()
  dir=$(manifests_dir)
  for f in "${HOSTPATH_MANIFESTS[@]}"; do files+=(-f "$dir/$f"); done
  kubectl create --dry-run=client -o json "${files[@]}" |
    jq --argjson drop "$SUITE_DROPS" 'if .kind == "StatefulSet" then
      .spec.template.spec.containers |= map(select(.name | IN($drop[]) | not)) |
      .spec.template.spec.volumes |= map(select(.name | IN($drop[]) | not)) else . end'
}

snapshot_crds() {
  local d
  d="$(mod_dir "github.com/kubernetes-csi/external-snapshotter/client/v8@$CSI_SNAPSHOTTER_VERSION")/config/crd"
  printf -- '-f\n%s\n' "$d"/snapshot.storage.k8s.io_*.yaml "$d"/groupsnapshot.storage.k8s.io_*.yaml
}

# snapshot_controller: external-snapshotter's deployment, its image at the version the bed builds (as
# csi-driver-host-path's CI sets it).
snapshot_controller() {
  local d
  d="$(mod_dir "github.com/kubernetes-csi/external-snapshotter/v8@$CSI_SNAPSHOTTER_VERSION")/deploy/kubernetes/snapshot-controller"
  cat "$d/rbac-snapshot-controller.yaml"
  echo "---"
  sed "s|image: registry.k8s.io/sig-storage/snapshot-controller:.*|image: registry.k8s.io/sig-storage/snapshot-controller:$CSI_SNAPSHOTTER_VERSION|" \
    "$d/setup-snapshot-controller.yaml"
}

hostpath_classes() {
  cat <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: csi-hostpath-sc
provisioner: $CSI_DRIVER
reclaimPolicy: Delete
volumeBindingMode: Immediate
allowVolumeExpansion: true
---
YAML
  cat "$(manifests_dir)/hostpath/hostpath/csi-hostpath-snapshotclass.yaml"
}

# wait_for DESCRIPTION SECONDS COMMAND...: until COMMAND succeeds, at most SECONDS.
wait_for() {
  local what=$1 limit=$2 deadline; shift 2
  deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "$what: not after ${limit}s"
    sleep 1
  done
}

csinode_has_driver() {
  kubectl get csinode "$NODE_NAME" -o jsonpath='{.spec.drivers[*].name}' | grep -qw "$CSI_DRIVER"
}

cmd_up() {
  local t0=$SECONDS d crds
  check_bed
  for d in "${DATA_DIRS[@]}"; do host_dir "$BED_DIR" "$d"; done
  mapfile -t crds < <(snapshot_crds)
  kubectl apply "${crds[@]}" >/dev/null
  kubectl wait --for=condition=Established --timeout=60s crd/volumesnapshotclasses.snapshot.storage.k8s.io \
    crd/volumesnapshotcontents.snapshot.storage.k8s.io crd/volumesnapshots.snapshot.storage.k8s.io >/dev/null
  snapshot_controller | kubectl apply -f - >/dev/null
  hostpath_objects | kubectl apply -f - >/dev/null
  hostpath_classes | kubectl apply -f - >/dev/null
  kind_storage_manifest | kubectl apply -f - >/dev/null
  log "applied; waiting for the driver and the provisioner"
  kubectl rollout status statefulset/csi-hostpathplugin --timeout=180s >/dev/null
  wait_for "CSINode $NODE_NAME lists $CSI_DRIVER" 60 csinode_has_driver
  kubectl -n local-path-storage rollout status deployment/local-path-provisioner --timeout=180s >/dev/null
  log "storage up in $((SECONDS - t0))s: StorageClasses $(kubectl get storageclass -o jsonpath='{.items[*].metadata.name}')"
}

cmd_down() {
  local crds
  kind_storage_manifest | kubectl delete --ignore-not-found -f - >/dev/null || true
  hostpath_classes | kubectl delete --ignore-not-found -f - >/dev/null 2>&1 || true
  hostpath_objects | kubectl delete --ignore-not-found -f - >/dev/null || true
  snapshot_controller | kubectl delete --ignore-not-found -f - >/dev/null || true
  mapfile -t crds < <(snapshot_crds)
  kubectl delete --ignore-not-found "${crds[@]}" >/dev/null || true
  log "storage removed (the volumes' data stays in ${DATA_DIRS[*]} until bed.sh clean)"
}

cmd_status() {
  kubectl get csidriver,storageclass
  kubectl get csinode "$NODE_NAME" -o jsonpath='{range .spec.drivers[*]}csinode driver {.name} (node id {.nodeID}){"\n"}{end}'
  kubectl get pods -o wide -l app.kubernetes.io/instance=$CSI_DRIVER
  kubectl -n local-path-storage get pods -o wide
  kubectl -n kube-system get pods -l app.kubernetes.io/name=snapshot-controller -o wide
}

main() {
  local cmd=${1:-}
  case $cmd in
    up | down | status) "cmd_$cmd" ;;
    *) echo "usage: storage.sh up|down|status" >&2; exit 2 ;;
  esac
}

main "$@"
