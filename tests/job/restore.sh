#!/usr/bin/env bash
# A job saved after 4 steps and restored to 7 ends bit for bit where 7 straight steps end:
# worker state and every PS shard.
set -euo pipefail
source "$(dirname "$0")/embedding-job.sh"
run --steps 4 --save "$work/checkpoint"
test -d "$work/checkpoint/worker" && test -d "$work/checkpoint/ps-0" && test -f "$work/checkpoint/ps-1.shards"
! ls -d "$work"/checkpoint.partial-* 2>/dev/null
mkdir -p "$work/resumed" "$work/straight"
run --steps 7 --restore "$work/checkpoint" --variables-out "$work/resumed"
run --steps 7 --variables-out "$work/straight"
for task in worker-0 worker-1 ps-0 ps-1; do
  cmp "$work/resumed/$task/checkpoint.prism" "$work/straight/$task/checkpoint.prism"
done
# Saving again over a checkpoint replaces it whole.
run --steps 2 --save "$work/checkpoint"
test -d "$work/checkpoint/worker" && ! ls -d "$work"/checkpoint.old-* 2>/dev/null
echo "4 + 3 steps across a restore equal 7 straight, byte for byte"
