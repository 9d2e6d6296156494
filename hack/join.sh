#!/usr/bin/env bash
# Bootstrap-token join: a node with nothing but a bootstrap token joins the bed's cluster as kubeadm
# join does — nodelet requests its client certificate through a kubernetes.io/kube-apiserver-client-kubelet CSR
# made with the token, the controller-manager approves and signs it (the RBAC bindings kubeadm creates), nodelet
# writes its kubeconfig and certificate, registers the Node as system:node:<name> and runs pods; with
# rotateCertificates and short certificates (BED_SIGNING_DURATION=2m) it then renews its certificate through a
# second CSR made as the node, without losing the node. With serverTLSBootstrap it asks for its serving
# certificate through a kubernetes.io/kubelet-serving CSR (approved here, as an operator would: nothing approves
# those by default) and serves each renewed one without a restart. Prints RESULT lines; exits non-zero when a
# step fails.
# Uses a bed of its own (BED_DIR default /var/lib/nodelet-bed-join) and tears it down (KEEP_BED=1 keeps it).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

export BED_DIR=${BED_DIR:-/var/lib/nodelet-bed-join} BIN_CACHE BED_SIGNING_DURATION=${BED_SIGNING_DURATION:-2m}
bed="$here/bed.sh"
J=$BED_DIR/join
TOKEN_ID=n0d3l7 TOKEN_SECRET=0123456789abcdef
K() { "$KUBE_BIN_DIR/kubectl" --kubeconfig "$BED_DIR/pki/admin.kubeconfig" "$@"; }
FAILED=0
result() { if [ "$1" = ok ]; then log "RESULT $2: ok"; else log "RESULT $2: FAILED${3:+ ($3)}"; FAILED=1; fi; }

teardown() {
  local rc=$?
  [ -n "${APPROVER_PID:-}" ] && kill "$APPROVER_PID" 2>/dev/null || true
  if [ "${KEEP_BED:-}" != 1 ]; then bash "$bed" down || true; fi
  exit "$rc"
}

# until_true SECONDS WHAT COMMAND...: polls COMMAND every second; false after SECONDS.
until_true() {
  local limit=$1 what=$2 start=$SECONDS; shift 2
  until "$@" >/dev/null 2>&1; do
    if [ $((SECONDS - start)) -gt "$limit" ]; then log "timed out after ${limit}s waiting for $what"; return 1; fi
    sleep 1
  done
}

# cluster_side: what kubeadm init sets up for joins: a bootstrap token, and the bindings that let its group
# ask for node client certificates (approved at once), and nodes renew theirs.
cluster_side() {
  K apply -f - <<YAML
apiVersion: v1
kind: Secret
metadata: {name: bootstrap-token-$TOKEN_ID, namespace: kube-system}
type: bootstrap.kubernetes.io/token
stringData:
  token-id: $TOKEN_ID
  token-secret: $TOKEN_SECRET
  usage-bootstrap-authentication: "true"
  auth-extra-groups: system:bootstrappers:nodelet:default-node-token
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: nodelet:node-bootstrapper}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node-bootstrapper}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:bootstrappers}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: nodelet:node-autoapprove-bootstrap}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:certificates.k8s.io:certificatesigningrequests:nodeclient}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:bootstrappers}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: nodelet:node-autoapprove-certificate-rotation}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:certificates.k8s.io:certificatesigningrequests:selfnodeclient}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:nodes}]
YAML
}

csr_count() { K get csr -o jsonpath="{range .items[?(@.spec.signerName==\"kubernetes.io/kube-apiserver-client-kubelet\")]}{.spec.username}{\"\\n\"}{end}" | grep -c "$1" || true; }
node_ready() { [ "$(K get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
cert_subject() { openssl x509 -noout -subject -nameopt RFC2253 -in "$J/pki/kubelet-client-current.pem"; }
cert_serial() { openssl x509 -noout -serial -in "$J/pki/kubelet-client-current.pem"; }
cert_renewed() { [ "$(cert_serial)" != "$FIRST_SERIAL" ]; }
# served_cert FIELD: a field (-subject, -issuer, -serial) of the certificate the node API serves.
served_cert() {
  openssl s_client -connect 127.0.0.1:10250 </dev/null 2>/dev/null | openssl x509 -noout "$1" -nameopt RFC2253 2>/dev/null
}
# serving_signed: the node API serves the certificate its manager got through a CSR (kubelet-server-current.pem).
serving_signed() {
  [ -s "$J/pki/kubelet-server-current.pem" ] && [ "$(served_cert -issuer)" = "issuer=$CA_SUBJECT" ] &&
    [ "$(served_cert -serial)" = "$(openssl x509 -noout -serial -in "$J/pki/kubelet-server-current.pem")" ]
}
serving_renewed() { serving_signed && [ "$(served_cert -serial)" != "$FIRST_SERVING_SERIAL" ]; }
# approve_serving: approves the node's pending kubelet-serving CSRs, as the cluster's operator would.
approve_serving() {
  local csr
  for csr in $(K get csr -o jsonpath="{range .items[?(@.spec.signerName==\"kubernetes.io/kubelet-serving\")]}{.metadata.name}{\" \"}{.status.conditions[0].type}{\"\n\"}{end}" |
    awk 'NF == 1 { print $1 }'); do
    K certificate approve "$csr" >/dev/null 2>&1 || true
  done
}
approver() { while :; do approve_serving; sleep 2; done; }

run_pod() {
  K apply -f - <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  nodeName: $NODE
  containers: [{name: main, image: busybox, command: [sh, -c, "sleep 3600"]}]
YAML
  K wait pod "$1" --for=condition=Ready --timeout=90s >/dev/null
}

main() {
  bash "$bed" clean >/dev/null 2>&1 || true
  trap teardown EXIT
  bash "$bed" up
  NODE=$(K get node -o jsonpath='{.items[0].metadata.name}')
  log "the node $NODE leaves: nodelet stops, its Node is deleted; a new one joins with a bootstrap token only"
  bash "$bed" stop nodelet
  K delete node "$NODE" --wait=true
  cluster_side
  rm -rf "$J"; mkdir -p "$J"
  K config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}' > "$J/server"
  cat > "$J/bootstrap-kubelet.conf" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: bed, cluster: {server: "$(cat "$J/server")", certificate-authority: "$BED_DIR/pki/ca.crt"}}]
users: [{name: tls-bootstrap-token-user, user: {token: "$TOKEN_ID.$TOKEN_SECRET"}}]
contexts: [{name: bootstrap, context: {cluster: bed, user: tls-bootstrap-token-user}}]
current-context: bootstrap
YAML
  # The bed's config names a serving certificate (tlsCertFile), which the serving certificate manager would use
  # until it nears its expiry: the joining node has none.
  grep -v '^tlsCertFile:\|^tlsPrivateKeyFile:' "$BED_DIR/nodelet/config.yaml" > "$J/config.yaml"
  local t0=$SECONDS
  # The later --kubeconfig and --config win over the bed's: a kubeconfig that does not exist yet.
  NODELET_EXTRA_ARGS="--config $J/config.yaml --kubeconfig $J/kubelet.conf --bootstrap-kubeconfig $J/bootstrap-kubelet.conf --cert-dir $J/pki --rotate-certificates --rotate-server-certificates" \
    bash "$bed" start nodelet
  CA_SUBJECT=$(openssl x509 -noout -subject -nameopt RFC2253 -in "$BED_DIR/pki/ca.crt" | sed 's/^subject=//')
  if until_true 120 "the node to join" node_ready; then
    log "JOIN: node $NODE Ready $((SECONDS - t0)) s after nodelet started with a bootstrap token"
    result ok "node joined with a bootstrap token"
  else
    result failed "node joined with a bootstrap token"
  fi
  [ "$(csr_count "system:bootstrap:$TOKEN_ID")" -ge 1 ] && result ok "CSR made with the token (system:bootstrap:$TOKEN_ID)" ||
    result failed "CSR made with the token"
  [ -s "$J/kubelet.conf" ] && grep -q "kubelet-client-current.pem" "$J/kubelet.conf" && result ok "kubeconfig written, using $J/pki/kubelet-client-current.pem" ||
    result failed "kubeconfig written"
  local subject; subject=$(cert_subject || true)
  [ "$subject" = "subject=CN=system:node:$NODE,O=system:nodes" ] && result ok "client certificate $subject" ||
    result failed "client certificate" "$subject"
  run_pod joined && result ok "a pod runs on the joined node" || result failed "a pod runs on the joined node"

  log "serverTLSBootstrap: approving the node's kubelet-serving CSRs as they come"
  approver &
  APPROVER_PID=$!
  if until_true 60 "the node API to serve a signed certificate" serving_signed; then
    result ok "serving certificate by CSR: $(served_cert -subject), issued by the cluster CA"
    K logs joined >/dev/null && result ok "kubectl logs through the node API with it" || result failed "kubectl logs through the node API with it"
  else
    result failed "serving certificate by CSR" "served: $(served_cert -subject) / $(served_cert -issuer)"
  fi
  FIRST_SERVING_SERIAL=$(served_cert -serial)

  FIRST_SERIAL=$(cert_serial)
  log "waiting for the client certificate ($BED_SIGNING_DURATION long) to be rotated"
  local t1=$SECONDS
  if until_true 300 "a renewed certificate" cert_renewed; then
    log "ROTATION: new client certificate $((SECONDS - t1)) s later ($(cert_serial)); CSRs by the node: $(csr_count "system:node:$NODE")"
    [ "$(csr_count "system:node:$NODE")" -ge 1 ] && result ok "certificate rotated through a CSR made as the node" ||
      result failed "certificate rotated through a CSR made as the node"
  else
    result failed "certificate rotated"
  fi
  if until_true 300 "a renewed serving certificate" serving_renewed; then
    result ok "serving certificate renewed and served without a restart ($(served_cert -serial))"
  else
    result failed "serving certificate renewed"
  fi
  sleep 5
  node_ready && run_pod after-rotation && result ok "node Ready and pods run after the rotation" ||
    result failed "node Ready and pods run after the rotation"
  [ "$FAILED" = 0 ] || die "join: FAILED (see RESULT lines)"
  log "join: every check passed"
}

main "$@"
