#!/usr/bin/env bash
# Recovery: a job that loses tasks (killed, stopped, killed while writing a checkpoint) restarts
# every task from its newest complete checkpoint and ends with variables byte for byte equal to
# an uninterrupted run, for a hybrid plan (2 workers, 2 parameter servers) and an all-reduce one.
# The faults are real signals the tasks send themselves at a step (PRISM_INJECT_FAULTS), so the
# test does not depend on timing.
set -euo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# NAME MODEL CLUSTER DATA EVERY FAULTS: one straight run, one with the faults (a restart each);
# both must agree.
check() {
  local name=$1 model=$2 cluster=$3 data=$4 every=$5 faults=$6 dir="$work/$1"
  local restarts; restarts=$(echo "$faults" | tr , '\n' | wc -l)
  mkdir -p "$dir/straight" "$dir/recovered"
  timeout 60 "$prism" partition "$source_dir/models/$model.prism" --cluster "$cluster" \
    --batch 64 -o "$dir/plan.pb" >/dev/null
  local run=(timeout 200 "$prism" run "$dir/plan.pb" --data "$data" --steps 120 --no-eval --quiet)
  "${run[@]}" --variables-out "$dir/straight"
  PRISM_INJECT_FAULTS="$faults" "${run[@]}" --variables-out "$dir/recovered" \
    --checkpoint-dir "$dir/checkpoints" --checkpoint-every "$every" --keep-checkpoints 2 \
    --max-restarts "$restarts" --heartbeat-timeout 1 2>"$dir/log" || { cat "$dir/log"; exit 1; }
  for restart in $(seq "$restarts"); do
    grep -q "(restart $restart of $restarts) from the checkpoint of step" "$dir/log" ||
      { echo "$name: no restart $restart"; cat "$dir/log"; exit 1; }
  done
  for file in "$dir"/straight/*/checkpoint.prism; do
    task=$(basename "$(dirname "$file")")
    cmp "$file" "$dir/recovered/$task/checkpoint.prism"
  done
  # Only complete checkpoints stay, the newest two.
  kept=$(ls "$dir/checkpoints")
  [ "$(echo "$kept" | wc -l)" = 2 ] && ! echo "$kept" | grep -q partial ||
    { echo "$name: checkpoints left: $kept"; exit 1; }
  echo "$name: $(grep -c 'restarting every task' "$dir/log") restarts, final variables equal"
}

# ps:0 killed after 37 steps (resumes from step 30), ps:1 stopped at step 55 (found by its
# silence), then worker:1 killed at step 80.
check hybrid embedding_classifier local:2,ps=2 zipf:100000,tokens=20,classes=10 10 \
  ps:0:kill@37,ps:1:stop@55,worker:1:kill@80
grep -q "from the checkpoint of step 30 " "$work/hybrid/log"
grep -q "ps:1 stopped answering" "$work/hybrid/log"
grep -q "from the checkpoint of step 50 " "$work/hybrid/log"
grep -q "from the checkpoint of step 80 " "$work/hybrid/log"
# worker:0 stops (SIGSTOP: found by its silence) after 37 steps, then dies while writing the
# checkpoint of step 80: that checkpoint is never complete, the restart starts from step 60.
check allreduce mlp local:2 fashion-mnist 20 worker:0:stop@37,worker:0:kill-in-checkpoint@80
grep -q "from the checkpoint of step 20 " "$work/allreduce/log"
grep -q "from the checkpoint of step 60 " "$work/allreduce/log"

# More failures than restarts: the job fails, naming the last cause and the restarts made.
dir="$work/allreduce"
if PRISM_INJECT_FAULTS=worker:1:kill@5,worker:0:kill@9 timeout 60 "$prism" run "$dir/plan.pb" \
  --steps 20 --no-eval --quiet --max-restarts 1 2>"$dir/exhausted"; then
  echo "a job with more failures than restarts succeeded"; exit 1
fi
grep -q "error: the job failed: worker:0 was killed by signal Killed (after 1 restart)" \
  "$dir/exhausted" || { cat "$dir/exhausted"; exit 1; }
# Without checkpoints a restart starts from the beginning.
grep -q "restarting every task (restart 1 of 1) from the start" "$dir/exhausted"

# A fault that cannot fire is refused.
if PRISM_INJECT_FAULTS=worker:1:kill-in-checkpoint@5 "$prism" run "$dir/plan.pb" --steps 20 \
  --checkpoint-dir "$dir/c" --checkpoint-every 5 2>"$dir/refused"; then
  echo "a fault worker:1 cannot inject was accepted"; exit 1
fi
grep -q "worker:1 writes no part of a checkpoint" "$dir/refused"
