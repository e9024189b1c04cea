#!/usr/bin/env bash
# Makes the TLS files the exporter's tests use (dashboard/tests/data/tls/):
# a CA, a server certificate for 127.0.0.1 and localhost signed by it, and a
# client certificate signed by it. They are test fixtures, committed so that
# tests need no openssl; the keys protect nothing. Valid for 100 years.
#
#     scripts/make-test-certs.sh [DIR]
set -euo pipefail
dir=${1:-$(dirname "$0")/../dashboard/tests/data/tls}
mkdir -p "$dir"
cd "$dir"
days=36500
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days $days \
  -subj "/CN=flatline test CA" -keyout ca-key.pem -out ca.pem \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
leaf() { # NAME CN EXT
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
    -keyout "$1-key.pem" -out "$1.csr" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days $days \
    -out "$1.pem" -extfile <(printf '%s\n' "$3") 2>/dev/null
  rm "$1.csr"
}
leaf server "flatline test server" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost"
leaf client "flatline test client" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
rm -f ca.srl ca-key.pem
ls
