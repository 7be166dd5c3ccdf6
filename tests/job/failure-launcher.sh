#!/usr/bin/env bash
# The launcher (which serves the coordinator) killed or stopped: every task notices the silent
# coordinator and exits within the heartbeat timeout. Killed, the job is resumed by running the
# same command again (it starts from the newest complete checkpoint in --checkpoint-dir);
# stopped and continued, the launcher finds its tasks gone and restarts them (--max-restarts).
# Either way the final variables equal an uninterrupted run's, byte for byte.
set -uo pipefail
source "$(dirname "$0")/embedding-job.sh"
job=(timeout 200 "$prism" run "$work/plan.pb" --data $data --no-eval
     --heartbeat-timeout 2 --checkpoint-dir "$work/checkpoints" --checkpoint-every 10)

# (The launcher is the `prism run` process: `timeout` above it is left alone.)
# Waits (up to 20 s) for a complete checkpoint.
wait_for_checkpoint() {
  for _ in $(seq 200); do ls "$work/checkpoints" 2>/dev/null | grep -qv partial && return 0; sleep 0.1; done
  echo "no checkpoint was completed"; exit 1
}
# Waits up to $1 seconds for every task to exit.
tasks_exit_within() {
  for _ in $(seq $(($1 * 10))); do pgrep -f "$work/plan.pb --task" >/dev/null || return 0; sleep 0.1; done
  echo "tasks still running $1 s after the launcher went: $(pgrep -af "$work/plan.pb --task")"; exit 1
}
same_as_straight() {
  mkdir -p "$work/straight"
  [ -f "$work/straight/ps-0/checkpoint.prism" ] ||
    "$prism" run "$work/plan.pb" --data $data --no-eval --quiet \
      --steps 150 --variables-out "$work/straight" || exit 1
  for file in "$work"/straight/*/checkpoint.prism; do
    task=$(basename "$(dirname "$file")")
    cmp "$file" "$work/$1/$task/checkpoint.prism" || exit 1
  done
}

# Killed: the tasks exit; the same command again resumes.
("${job[@]}" --steps 100000 --quiet >/dev/null 2>&1 &)
wait_for_checkpoint
pkill -KILL -f "prism run $work/plan.pb"
tasks_exit_within 10
mkdir -p "$work/resumed"
"${job[@]}" --steps 150 --variables-out "$work/resumed" >"$work/out" 2>&1 || { cat "$work/out"; exit 1; }
grep -q "resuming from the checkpoint of step" "$work/out" || { cat "$work/out"; exit 1; }
same_as_straight resumed
echo "SIGKILL: tasks gone; $(grep resuming "$work/out")"

# Stopped for longer than the heartbeat timeout, then continued: the tasks are gone, and the
# launcher restarts them from the newest checkpoint.
rm -rf "$work/checkpoints"
mkdir -p "$work/restarted"
"${job[@]}" --steps 150 --quiet --max-restarts 1 --variables-out "$work/restarted" >"$work/out" 2>&1 &
launcher=$!
wait_for_checkpoint
pkill -STOP -f "prism run $work/plan.pb"
tasks_exit_within 10
pkill -CONT -f "prism run $work/plan.pb"
wait $launcher || { echo "the continued launcher failed"; cat "$work/out"; exit 1; }
grep -q "restarting every task (restart 1 of 1)" "$work/out" || { cat "$work/out"; exit 1; }
same_as_straight restarted
echo "SIGSTOP: tasks gone; $(grep 'lost a task' "$work/out")"
