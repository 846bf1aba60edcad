#!/bin/sh
# A self-signed set for compose (or a first try): a private CA, a server certificate it signs
# (for localhost, the compose service names and 127.0.0.1) and a backend key, in DIR
# (default var/secrets). Clients trust DIR/ca.crt; backends send DIR/backend.key as x-api-key.
# Rotate: run it again with a new DIR, copy the files over, `docker compose kill -s HUP`.
set -eu
dir="${1:-var/secrets}"
names="${TAPIS_CERT_NAMES:-DNS:localhost,DNS:tapis,DNS:tapis-1,DNS:tapis-2,DNS:tapis-3,IP:127.0.0.1}"
mkdir -p "$dir"
cd "$dir"
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 825 \
    -subj "/CN=Tapis private CA" -keyout ca.key -out ca.crt 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=tapis" \
    -keyout tls.key -out tls.csr 2>/dev/null
printf "subjectAltName=%s\n" "$names" > san.ext
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 825 \
    -extfile san.ext -out tls.crt 2>/dev/null
openssl rand -base64 32 | tr -d '\n' > backend.key
printf "%s backend\n" "$(cat backend.key)" > api-keys
rm -f tls.csr san.ext ca.srl
chmod 755 .  # the container runs as another user (uid 10001): it must read them
chmod 644 ca.crt tls.crt tls.key api-keys
echo "wrote $(pwd): ca.crt tls.crt tls.key api-keys backend.key"
