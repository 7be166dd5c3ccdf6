#!/usr/bin/env bash
# The stall report: a task stopped for longer than the stall bound (3 s) but shorter than the
# heartbeat timeout makes the others name what they wait for in the job's log, and again when the
# wait ends; the job then goes on. What a worker waits for depends on where in the step the stop
# finds it: a stopped ps:0 holds up a push or a row pull (and a worker whose peer waits on ps:0
# waits for the all-reduce); a stopped worker:1 holds up worker:0's all-reduce, or the parameter
# servers when it stopped between its all-reduce and its push.
set -uo pipefail
source "$(dirname "$0")/embedding-job.sh"

# stall TASK WAITER WHAT: stops TASK until WAITER reports waiting for WHAT, then resumes it.
stall() {
  local task=$1 waiter=$2 what=$3
  timeout 120 "$prism" run "$work/plan.pb" --data $data --steps 1000000 --no-eval --quiet \
    --heartbeat-timeout 20 >"$work/out" 2>&1 &
  local launcher=$!
  for _ in $(seq 100); do pgrep -f "$work/plan.pb --task $task" >/dev/null && break; sleep 0.1; done
  sleep 2
  pkill -STOP -f "$work/plan.pb --task $task" || { echo "no $task to stop"; return 1; }
  local line="^\[$waiter\] waiting [3-9]\.[0-9] s so far for $what"
  for _ in $(seq 100); do grep -Eq "$line" "$work/out" && break; sleep 0.1; done
  pkill -CONT -f "$work/plan.pb --task $task"
  local done_line="^\[$waiter\] done waiting for $what.* after [0-9.]* s$"
  for _ in $(seq 100); do grep -Eq "$done_line" "$work/out" && break; sleep 0.1; done
  kill -INT $launcher 2>/dev/null
  wait $launcher
  pkill -KILL -f "$work/plan.pb" 2>/dev/null
  echo "$task stopped:"; grep "waiting" "$work/out"
  if ! grep -Eq "$line" "$work/out"; then
    echo "no line '$line' 10 s after $task stopped"; cat "$work/out"; return 1
  fi
  if ! grep -Eq "$done_line" "$work/out"; then
    echo "the end of the wait is not reported ('$done_line')"; cat "$work/out"; return 1
  fi
}

stall ps:0 "worker:[01]" "the parameter servers: (push step [0-9]+|pull .+)" ||
  exit 1
stall worker:1 worker:0 \
  "(the all-reduce over group 'workers' of .*bucket [0-9]|the parameter servers: .+)" ||
  exit 1
