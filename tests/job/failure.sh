#!/usr/bin/env bash
# A worker that dies, or stops answering, stops the whole job within a bound: every process
# exits, the launcher exits non-zero and names the task.
set -uo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d)
cleanup() { pkill -KILL -f "$work/plan.pb" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
timeout 60 "$prism" partition "$source_dir/models/mlp.prism" --cluster local:3 --batch 96 \
  -o "$work/plan.pb" >/dev/null || exit 1

# wait_for PATTERN: until a task process matching it runs (bounded).
wait_for() {
  for _ in $(seq 100); do pgrep -f "$1" >/dev/null && return 0; sleep 0.1; done
  echo "no process matching $1"; return 1
}

for how in KILL STOP; do
  start=$(date +%s)
  timeout 60 "$prism" run "$work/plan.pb" --steps 1000000 --no-eval --quiet --heartbeat-timeout 2 \
    >"$work/out" 2>&1 &
  launcher=$!
  wait_for "$work/plan.pb --task worker:1" || exit 1
  sleep 2
  pkill -$how -f "$work/plan.pb --task worker:1"
  wait $launcher; status=$?
  elapsed=$(( $(date +%s) - start ))
  if [ $status -eq 0 ] || [ $status -eq 124 ]; then
    echo "SIG$how: the job did not stop by itself (status $status)"; cat "$work/out"; exit 1
  fi
  if ! grep -q "error: the job failed: worker:1" "$work/out"; then
    echo "SIG$how: the error does not name worker:1"; cat "$work/out"; exit 1
  fi
  if pgrep -f "$work/plan.pb --task" >/dev/null; then
    echo "SIG$how: tasks are still running after the launcher exited"; exit 1
  fi
  echo "SIG$how: stopped in ${elapsed} s: $(grep 'error: the job failed' "$work/out")"
done
