#!/usr/bin/env bash
# make-pki.sh DIR: a CA, a server certificate for 127.0.0.1, ::1 and
# localhost (subjectAltName: Go and libcurl ignore the CN), and a client
# certificate, all signed by the CA. EC P-256 keys: quick to make.
#   DIR/ca.crt ca.key  server.crt server.key  client.crt client.key
set -euo pipefail
dir=${1:?usage: make-pki.sh DIR}
mkdir -p "$dir"
cd "$dir"
umask 077

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=dowser-test-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out ca.crt

# sign NAME SUBJECT EXTENSIONS
sign() {
  key "$1.key"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days 3650 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

sign server "/CN=dowser-test-apiserver" \
  "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost"
sign client "/O=system:masters/CN=dowser-test-client" \
  "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
rm -f ca.srl
chmod 644 ca.crt server.crt client.crt
