#!/usr/bin/env bash
# prism verify exits 1 when the runs differ by more than the tolerance: two workers sum each
# gradient in another order than one device, so at 1e-12 the float32 runs are not equal.
set -uo pipefail
prism="$1"; source_dir="$2"
out=$(timeout 240 "$prism" verify "$source_dir/models/mlp.prism" --cluster local:2 --steps 5 \
  --batch 64 --tolerance 1e-12 2>&1); status=$?
echo "$out"
[ $status -eq 1 ] && grep -q "NOT equal" <<<"$out"
