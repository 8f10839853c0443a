# shellcheck shell=bash
# Throwaway TLS material for the brokers the scripts start (source lib/broker.sh first: log, die).
#
# test_certs DIR: make, once, a self-signed CA and a server certificate for 127.0.0.1 and localhost in
# DIR: ca.pem (what clients trust: mqtarget's *.tls_ca_file), server.pem and server.key (PEM, PKCS#8
# key: RocketMQ/Netty) and server.p12 (PKCS#12, password TLS_STORE_PASSWORD: Artemis). Test use only:
# the CA key stays beside them.
TLS_STORE_PASSWORD=mqtarget

test_certs() {
  local dir=$1 tmp
  if [[ -s $dir/ca.pem && -s $dir/server.pem && -s $dir/server.key && -s $dir/server.p12 ]]; then
    return 0
  fi
  command -v openssl >/dev/null || die "openssl not found (apt-get install -y openssl)"
  mkdir -p "$dir"
  tmp=$(mktemp -d "$dir/.gen.XXXXXX")
  {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
      -subj "/CN=mqtarget test CA" -keyout "$tmp/ca.key" -out "$tmp/ca.pem" \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign &&
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=127.0.0.1" \
        -keyout "$tmp/server.key" -out "$tmp/server.csr" &&
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$tmp/ext" &&
      openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -CAcreateserial \
        -days 3650 -extfile "$tmp/ext" -out "$tmp/server.pem" &&
      openssl pkcs12 -export -in "$tmp/server.pem" -inkey "$tmp/server.key" -name server \
        -passout "pass:$TLS_STORE_PASSWORD" -out "$tmp/server.p12"
  } >"$tmp/openssl.log" 2>&1 || { cat "$tmp/openssl.log" >&2; rm -rf "$tmp"; die "openssl could not make test certificates"; }
  mv "$tmp"/ca.pem "$tmp"/ca.key "$tmp"/server.pem "$tmp"/server.key "$tmp"/server.p12 "$dir"/
  rm -rf "$tmp"
  log "made test certificates in $dir (CA: $dir/ca.pem)"
}
