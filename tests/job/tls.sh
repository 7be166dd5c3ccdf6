#!/usr/bin/env bash
# TLS on every gRPC channel of a job: with the job's own CA (--tls) and with certificates made
# elsewhere (openssl, one per task through {task}), a hybrid job (2 workers, 2 parameter
# servers) trains to the same variables as a plaintext one, byte for byte; the job's certificate
# directory is gone when it ends; flags that cannot work are errors.
set -euo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export TMPDIR="$work/tmp"; mkdir -p "$TMPDIR"
timeout 60 "$prism" partition "$source_dir/models/embedding_classifier.prism" --cluster local:2,ps=2 \
  --batch 64 -o "$work/plan.pb" >/dev/null
run() { timeout 120 "$prism" run "$work/plan.pb" --data zipf:100000,tokens=20,classes=10 --steps 12 \
  --no-eval --quiet "$@"; }
same() {
  for file in "$work"/plain/*/checkpoint.prism; do
    cmp "$file" "$work/$1/$(basename "$(dirname "$file")")/checkpoint.prism"
  done
}

mkdir -p "$work/plain" "$work/generated" "$work/given"
run --variables-out "$work/plain"
run --tls --variables-out "$work/generated"
same generated
# The job's CA and keys lived in a private directory under TMPDIR, removed with the job.
! ls -d "$TMPDIR"/prism-tls* 2>/dev/null

# Certificates from another CA (here openssl's command line): each names its task (CN) and
# carries <task file name>.prism as a DNS name.
if command -v openssl >/dev/null; then
  source "$(dirname "$0")/make-certs.sh"
  certs="$work/certs"
  make_certs "$certs" coordinator:0 worker:0 worker:1 ps:0 ps:1
  run --tls-ca "$certs/ca.pem" --tls-cert "$certs/{task}.pem" --tls-key "$certs/{task}.key" \
    --variables-out "$work/given"
  same given
  echo "TLS with certificates from openssl: equal"
fi

# Flags that cannot work.
if run --tls --tls-ca "$work/x" --tls-cert "$work/{task}" --tls-key "$work/{task}" 2>"$work/err"; then
  echo "--tls with --tls-ca was accepted"; exit 1
fi
grep -q "error: --tls makes the job's certificates and --tls-ca, --tls-cert and --tls-key give them" "$work/err"
if run --tls-ca "$work/x" --tls-cert "$work/one.pem" --tls-key "$work/one.key" 2>"$work/err"; then
  echo "one certificate for every task was accepted"; exit 1
fi
grep -q "each task needs its own certificate; put {task} in both paths" "$work/err"
if run --tls-ca "$work/x.pem" --tls-cert "$work/{task}.pem" --tls-key "$work/{task}.key" 2>"$work/err"; then
  echo "missing certificate files were accepted"; exit 1
fi
grep -q "does not exist" "$work/err"
echo "TLS: plaintext, --tls and given certificates train the same variables"
