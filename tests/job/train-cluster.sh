#!/usr/bin/env bash
# README's main job, shortened: the cnn on Fashion-MNIST with 2 workers on loopback, through
# `prism train --cluster`, with test-set evaluation at the end.
set -euo pipefail
prism="$1"; source_dir="$2"
out=$(timeout 240 "$prism" train "$source_dir/models/cnn.prism" --data fashion-mnist \
  --cluster local:2 --steps 40 --batch 128 2>&1)
echo "$out"
grep -q "2 workers" <<<"$out"
grep -q "test accuracy" <<<"$out" || grep -q "accuracy" <<<"$out"
grep -q "^done: 40 steps" <<<"$out"
