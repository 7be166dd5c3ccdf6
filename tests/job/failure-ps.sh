#!/usr/bin/env bash
# A parameter server that dies or stops answering: the job stops within a bound and the final
# line names that server, not a task that exited because the job was aborted (a stopped ps:0
# used to be reported as "ps:1 exited with status 1").
set -uo pipefail
source "$(dirname "$0")/embedding-job.sh"

wait_for() {
  for _ in $(seq 100); do pgrep -f "$1" >/dev/null && return 0; sleep 0.1; done
  echo "no process matching $1"; return 1
}

for how in KILL STOP; do
  timeout 60 "$prism" run "$work/plan.pb" --data $data --steps 1000000 \
    --no-eval --quiet --heartbeat-timeout 2 >"$work/out" 2>&1 &
  launcher=$!
  wait_for "$work/plan.pb --task ps:0" || exit 1
  sleep 3
  pkill -$how -f "$work/plan.pb --task ps:0"
  wait $launcher; status=$?
  if [ $status -eq 0 ] || [ $status -eq 124 ]; then
    echo "SIG$how: the job did not stop by itself (status $status)"; cat "$work/out"; exit 1
  fi
  want="error: the job failed: ps:0 was killed by signal"
  [ $how = STOP ] && want="error: the job failed: ps:0 stopped answering"
  if ! grep -q "$want" "$work/out"; then
    echo "SIG$how: the last line does not name ps:0 as the cause"; cat "$work/out"; exit 1
  fi
  if grep -q "parameter server 127" "$work/out"; then
    echo "SIG$how: a parameter server is named by its address alone"; cat "$work/out"; exit 1
  fi
  pkill -KILL -f "$work/plan.pb" 2>/dev/null
  echo "SIG$how: $(grep 'error: the job failed' "$work/out")"
done
