#!/usr/bin/env bash
# Gradient accumulation from the command line: K is checked, the plan carries it (prism dump
# shows the micro-batches and the memory saved), and prism run honours it.
set -euo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
data=zipf:100000,tokens=20,classes=10

source "$source_dir/tests/job/expect-error.sh"
expect_error "option --accumulate: expected a number of micro-batches per step, at least 1, got 0" \
  "$prism" partition "$source_dir/models/mlp.prism" --cluster local:2 --accumulate 0 -o "$work/x.pb"
expect_error "give a --batch of at least 80 or a smaller --accumulate" \
  "$prism" partition "$source_dir/models/mlp.prism" --cluster local:2 --batch 64 --accumulate 40 \
  -o "$work/x.pb"
expect_error "splits each step's 64 examples into micro-batches: give at most 64" \
  "$prism" train "$source_dir/models/mlp.prism" --batch 64 --accumulate 65 --steps 1 --no-eval
expect_error "gradient accumulation (--accumulate K, K >= 2)" \
  "$prism" verify "$source_dir/models/mlp.prism"

"$prism" partition "$source_dir/models/embedding_classifier.prism" --cluster local:2,ps=1 \
  --batch 128 --accumulate 4 -o "$work/plan.pb"
dump=$("$prism" dump "$work/plan.pb"); echo "$dump"
grep -q "^plan embedding_classifier .*, version 5" <<<"$dump"
grep -q "^batch     128 global, 64 per worker in 4 micro-batches of 16" <<<"$dump"
grep -q "activations .* (one micro-batch; .* saved)" <<<"$dump"
json=$("$prism" dump "$work/plan.pb" --format json)
grep -q '"accumulate": 4' <<<"$json"
grep -q '"micro_batch": 16' <<<"$json"

out=$(timeout 120 "$prism" run "$work/plan.pb" --data "$data" --steps 5 --no-eval 2>&1); echo "$out"
grep -q "^done: 5 steps" <<<"$out"

out=$(timeout 120 "$prism" train "$source_dir/models/mlp.prism" --data fashion-mnist --batch 64 \
  --accumulate 4 --steps 3 --no-eval 2>&1); echo "$out"
grep -q "batch 64 in 4 micro-batches" <<<"$out"
grep -q "^trained 3 steps" <<<"$out"
