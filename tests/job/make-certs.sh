# Sourced by the TLS tests: make_certs DIR TASK... makes, with openssl's command line, a CA
# (DIR/ca.pem) and for each task DIR/<file>.pem and .key (worker:0 -> worker-0), each naming its
# task (CN) and carrying <file>.prism as a DNS name: what Prism's own --tls makes.
make_certs() {
  local dir=$1; shift
  mkdir -p "$dir"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/ca.key" \
    -out "$dir/ca.pem" -subj /CN=test-ca -days 1 2>/dev/null
  for task in "$@"; do
    local file=${task/:/-}
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/$file.key" \
      -out "$dir/$file.csr" -subj "/CN=$task" 2>/dev/null
    printf 'subjectAltName=DNS:%s.prism\nextendedKeyUsage=serverAuth,clientAuth\n' "$file" \
      >"$dir/$file.ext"
    openssl x509 -req -in "$dir/$file.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
      -CAcreateserial -days 1 -extfile "$dir/$file.ext" -out "$dir/$file.pem" 2>/dev/null
  done
}
