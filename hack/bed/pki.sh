# Test bed PKI: a CA, the API server's serving cert, the service-account key pair, client certs and kubeconfigs
# for each component and the node agent, and a serving cert for the node. Generated once into $PKI_DIR;
# anything missing is regenerated, and the certs that name this machine are redone when its name or IP changes.
# Sourced by bed.sh, not run. Needs PKI_DIR, NODE_NAME, NODE_IP, APISERVER_URL.
# shellcheck shell=bash

# new_key FILE: an ECDSA P-256 private key (PKCS#8), readable by root only.
new_key() {
  (umask 077 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null)
}

# new_ca NAME CN: a self-signed CA NAME.{key,crt}.
new_ca() {
  new_key "$PKI_DIR/$1.key"
  openssl req -x509 -new -key "$PKI_DIR/$1.key" -sha256 -days 3650 -subj "/CN=$2" \
    -out "$PKI_DIR/$1.crt" -config <(printf '%s\n' '[req]' 'distinguished_name=dn' 'x509_extensions=v3' '[dn]' \
      '[v3]' 'basicConstraints=critical,CA:TRUE' 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature' \
      'subjectKeyIdentifier=hash')
}

# sign NAME SUBJECT EKU [SANS [CA]]: a key and a certificate NAME.{key,crt} signed by CA (default: ca).
# EKU is serverAuth, clientAuth or both; SANS an openssl subjectAltName list (DNS:x,IP:y).
sign() {
  local name=$1 subject=$2 eku=$3 sans=${4:-} ca=${5:-ca} ext
  new_key "$PKI_DIR/$name.key"
  ext=$(mktemp)
  printf '%s\n' 'basicConstraints=critical,CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
    "extendedKeyUsage=$eku" 'authorityKeyIdentifier=keyid' > "$ext"
  [ -z "$sans" ] || echo "subjectAltName=$sans" >> "$ext"
  openssl req -new -key "$PKI_DIR/$name.key" -subj "$subject" 2>/dev/null |
    openssl x509 -req -CA "$PKI_DIR/$ca.crt" -CAkey "$PKI_DIR/$ca.key" -set_serial "0x$(openssl rand -hex 16)" \
      -days 3650 -sha256 -extfile "$ext" -out "$PKI_DIR/$name.crt" 2>/dev/null
  rm -f "$ext"
}

# kubeconfig NAME USER: NAME.kubeconfig with the CA and NAME's client cert embedded.
kubeconfig() {
  local name=$1 user=$2
  (umask 077 && cat > "$PKI_DIR/$name.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: nodelet-bed
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $(base64 -w0 "$PKI_DIR/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 "$PKI_DIR/$name.crt")
    client-key-data: $(base64 -w0 "$PKI_DIR/$name.key")
contexts:
- name: $user@nodelet-bed
  context:
    cluster: nodelet-bed
    user: $user
current-context: $user@nodelet-bed
KC
  )
}

# client NAME CN [O]: a client cert and its kubeconfig, unless both exist.
client() {
  local name=$1 cn=$2 org=${3:-} subject
  [ -s "$PKI_DIR/$name.crt" ] && [ -s "$PKI_DIR/$name.kubeconfig" ] && return 0
  subject="/CN=$cn"
  [ -z "$org" ] || subject="/O=$org$subject"
  sign "$name" "$subject" clientAuth
  kubeconfig "$name" "$cn"
}

service_account_keys() {
  [ -s "$PKI_DIR/sa.key" ] && [ -s "$PKI_DIR/sa.pub" ] && return 0
  (umask 077 && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI_DIR/sa.key" 2>/dev/null)
  openssl pkey -in "$PKI_DIR/sa.key" -pubout -out "$PKI_DIR/sa.pub" 2>/dev/null
}

apiserver_cert() {
  [ -s "$PKI_DIR/apiserver.crt" ] && return 0
  local sans="IP:127.0.0.1,IP:10.96.0.1,IP:$NODE_IP,DNS:localhost,DNS:$NODE_NAME,DNS:kubernetes"
  sans+=",DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  sign apiserver "/CN=kube-apiserver" serverAuth "$sans"
}

node_serving_cert() {
  [ -s "$PKI_DIR/node-serving.crt" ] && return 0
  sign node-serving "/O=system:nodes/CN=system:node:$NODE_NAME" serverAuth "DNS:$NODE_NAME,IP:127.0.0.1,IP:$NODE_IP"
}

# front_proxy: the API server's request-header (aggregation) CA and client cert; with them the
# extension-apiserver-authentication ConfigMap is complete and the scheduler and controller-manager stop
# complaining about a missing requestheader CA bundle.
front_proxy() {
  if [ ! -s "$PKI_DIR/front-proxy-ca.crt" ] || [ ! -s "$PKI_DIR/front-proxy-ca.key" ]; then
    new_ca front-proxy-ca nodelet-bed-front-proxy-ca
    rm -f "$PKI_DIR/front-proxy-client.crt"
  fi
  [ -s "$PKI_DIR/front-proxy-client.crt" ] || sign front-proxy-client /CN=front-proxy-client clientAuth "" front-proxy-ca
}

# forget_machine_certs: drop what names this machine when its name or IP changed since the last run.
forget_machine_certs() {
  local id="$NODE_NAME $NODE_IP"
  [ "$(cat "$PKI_DIR/machine" 2>/dev/null)" = "$id" ] && return 0
  rm -f "$PKI_DIR"/{apiserver,node-serving,nodelet}.{crt,key} "$PKI_DIR/nodelet.kubeconfig"
  echo "$id" > "$PKI_DIR/machine"
}

ensure_pki() {
  mkdir -p "$PKI_DIR"
  if [ ! -s "$PKI_DIR/ca.crt" ] || [ ! -s "$PKI_DIR/ca.key" ]; then
    log "generating PKI in $PKI_DIR"
    rm -f "$PKI_DIR"/*.crt "$PKI_DIR"/*.key "$PKI_DIR"/*.kubeconfig "$PKI_DIR/machine"
    new_ca ca nodelet-bed-ca
  fi
  forget_machine_certs
  service_account_keys
  front_proxy
  apiserver_cert
  node_serving_cert
  client admin kubernetes-admin system:masters
  client controller-manager system:kube-controller-manager
  client scheduler system:kube-scheduler
  client nodelet "system:node:$NODE_NAME" system:nodes
  client apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
}
