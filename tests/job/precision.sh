#!/usr/bin/env bash
# bf16 compute end to end: the distributed bf16 run (2 workers, hybrid) equals single-device bf16
# training within the default tolerance (1e-5): bf16 rounds element by element, so splitting the batch changes nothing but f32 summation order. Skips (77) on a CPU without AVX512_BF16.
set -euo pipefail
prism="$1"; source_dir="$2"
grep -qE 'avx512_bf16|amx_bf16' /proc/cpuinfo || { echo "no AVX512_BF16 here: skipped"; exit 77; }
out=$(timeout 240 "$prism" verify "$source_dir/tests/models/small_cnn.prism" --data fashion-mnist \
  --cluster local:2 --precision bf16 --steps 20 --batch 64 2>&1)
echo "$out"
grep -q "equal to single-device training within" <<<"$out"
