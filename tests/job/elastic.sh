#!/usr/bin/env bash
# Elastic membership (--elastic MIN:MAX): a job that loses one of its three workers (killed, or
# stopped until the coordinator hears nothing) finishes every step with the two left, exits 0,
# logs when and why its membership changed, and its metrics say 3 then 2 workers. The
# interrupted step is redone exactly: the survivors end with the variables of a job that ran
# three workers up to that step and two from a checkpoint of it (byte for byte), for an
# all-reduce model and one with parameter-server variables. Rank 0's duties move with it; a job
# left with fewer than MIN workers fails saying so; bad flags are refused naming them. The
# faults are signals the tasks send themselves at a step (PRISM_INJECT_FAULTS).
set -euo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d); trap 'pkill -KILL -f "$work/" 2>/dev/null || true; rm -rf "$work"' EXIT
source "$(dirname "$0")/expect-error.sh"
fail() { echo "$1"; [ -f "${2:-/dev/null}" ] && cat "$2"; exit 1; }


# check_metrics FILE STEPS CHANGE: a line per step, 3 workers before step CHANGE and 2 after,
# every loss finite.
check_metrics() {
  python3 - "$@" <<'EOF' || exit 1
import json, math, sys
path, steps, change = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lines = [json.loads(l) for l in open(path) if '"loss"' in l]
assert [l["step"] for l in lines] == list(range(1, steps + 1)), "steps " + str([l["step"] for l in lines])
workers = [int(l["workers"]) for l in lines]
assert workers == [3] * change + [2] * (steps - change), "workers per step " + str(workers)
assert all(math.isfinite(l["loss"]) for l in lines), "a loss is not finite"
EOF
}

# NAME MODEL CLUSTER(3 workers) DATA FAULT [RUN FLAGS]: the elastic job with FAULT at step 20 of
# 60, against 3 workers for 20 steps then 2 from a checkpoint.
check() {
  local name=$1 model=$2 cluster=$3 data=$4 fault=$5; shift 5
  local dir="$work/$name"
  mkdir -p "$dir"
  for workers in 3 2; do
    timeout 60 "$prism" partition "$source_dir/models/$model.prism" \
      --cluster "${cluster/local:3/local:$workers}" --batch 96 -o "$dir/plan$workers.pb" >/dev/null
  done
  timeout 60 "$prism" partition "$source_dir/models/$model.prism" --cluster "$cluster" \
    --batch 96 --elastic 2:3 -o "$dir/elastic.pb" >/dev/null
  local run=(timeout 100 "$prism" run --data "$data" --no-eval --quiet)
  "${run[@]}" "$dir/plan3.pb" --steps 20 --save "$dir/step20"
  "${run[@]}" "$dir/plan2.pb" --steps 60 --restore "$dir/step20" --variables-out "$dir/reference"
  PRISM_INJECT_FAULTS="$fault" timeout 100 "$prism" run "$dir/elastic.pb" --data "$data" \
    --steps 60 --metrics-out "$dir/metrics" --variables-out "$dir/elastic" "$@" \
    >"$dir/log" 2>&1 || fail "$name: the elastic job failed" "$dir/log"
  local lost=${fault%%:[a-z]*@*}
  grep -q "membership 1 from step 20: 2 workers" "$dir/log" &&
    grep -q "$lost was lost: it " "$dir/log" ||
    fail "$name: the log does not say when and why the membership changed" "$dir/log"
  check_metrics "$dir/metrics" 60 20
  # Survivors in rank order against the two workers of the reference.
  local survivors; survivors=$(cd "$dir/elastic" && ls -d worker-* | sort -t- -k2 -n)
  [ "$(echo "$survivors" | wc -l)" = 2 ] || fail "$name: survivors $survivors"
  local rank=0
  for task in $survivors; do
    same_variables "$dir/elastic/$task/checkpoint.prism" \
      "$dir/reference/worker-$rank/checkpoint.prism" ||
      fail "$name: $task's variables differ from the reference's worker:$rank"
    rank=$((rank + 1))
  done
  for file in "$dir"/reference/ps-*/checkpoint.prism; do
    [ -f "$file" ] || continue
    cmp "$file" "$dir/elastic/$(basename "$(dirname "$file")")/checkpoint.prism" ||
      fail "$name: the parameter server's variables differ from the reference"
  done
  echo "$name: $(grep -o "membership 1 from step 20.*" "$dir/log"); survivors equal the reference"
}

mnist=fashion-mnist
zipf=zipf:100000,tokens=20,classes=10
check mlp-kill mlp local:3 $mnist worker:1:kill@20
check embedding-kill embedding_classifier local:3,ps=1 $zipf worker:1:kill@20
# A stopped worker is dropped once silent past the heartbeat timeout (and killed by the launcher).
check mlp-stop mlp local:3 $mnist worker:2:stop@20 --heartbeat-timeout 2
grep -q "no heartbeat for" "$work/mlp-stop/log" || fail "mlp-stop: not found silent" "$work/mlp-stop/log"
# worker:0 lost: worker:1 takes rank 0's duties (progress, metrics, evaluation, the last line).
check mlp-rank0 mlp local:3 $mnist worker:0:kill@20
grep -q "^done: 60 steps" "$work/mlp-rank0/log" || fail "mlp-rank0: no done line" "$work/mlp-rank0/log"

# prism train --cluster takes --elastic too.
PRISM_INJECT_FAULTS=worker:2:kill@5 timeout 100 "$prism" train "$source_dir/models/mlp.prism" \
  --cluster local:3 --elastic 2:3 --batch 96 --steps 15 --no-eval --metrics-out "$work/train" \
  >"$work/train.log" 2>&1 || fail "train --cluster: failed" "$work/train.log"
check_metrics "$work/train" 15 5

# Fewer than MIN left: the job fails, saying so.
timeout 60 "$prism" partition "$source_dir/models/mlp.prism" --cluster local:3 --batch 96 \
  --elastic 3:4 -o "$work/min3.pb" >/dev/null
PRISM_INJECT_FAULTS=worker:1:kill@5 expect_error \
  "worker:1 was killed by signal Killed, and the 2 workers left are fewer than --elastic's minimum of 3" \
  timeout 100 "$prism" run "$work/min3.pb" --steps 30 --no-eval --quiet
! pgrep -f "$work/min3.pb" >/dev/null || fail "tasks left after the failed job"

# Bad values and combinations name the flag.
mlp="$source_dir/models/mlp.prism"
expect_error "--elastic 3:2: MIN is larger than MAX" \
  "$prism" partition "$mlp" --cluster local:3 --elastic 3:2 -o "$work/x.pb"
expect_error "--elastic 0:3: MIN must be at least 1 worker" \
  "$prism" partition "$mlp" --cluster local:3 --elastic 0:3 -o "$work/x.pb"
expect_error "--elastic 1:2: MAX is below the cluster's 3 workers" \
  "$prism" partition "$mlp" --cluster local:3 --elastic 1:2 -o "$work/x.pb"
expect_error "--elastic 4:5: MIN is more than the cluster's 3 workers" \
  "$prism" partition "$mlp" --cluster local:3 --elastic 4:5 -o "$work/x.pb"
expect_error "--elastic two: expected MIN:MAX" \
  "$prism" partition "$mlp" --cluster local:3 --elastic two -o "$work/x.pb"
expect_error "and --elastic 1:2 lets the set of workers change" \
  "$prism" verify "$mlp" --cluster local:2 --elastic 1:2
expect_error "--elastic 1:2 lets a job's workers come and go: it needs --cluster" \
  "$prism" train "$mlp" --elastic 1:2 --steps 1
expect_error "--max-restarts 1 and the plan's --elastic 2:3 do not go together" \
  "$prism" run "$work/mlp-kill/elastic.pb" --steps 1 --max-restarts 1
expect_error "prism task --join: the plan $work/mlp-kill/plan3.pb is not elastic" \
  "$prism" task "$work/mlp-kill/plan3.pb" --join --coordinator 127.0.0.1:1
"$prism" dump "$work/mlp-kill/elastic.pb" | grep -q "^elastic   2 to 3 workers" ||
  fail "prism dump does not show the elastic range"
"$prism" dump "$work/mlp-kill/elastic.pb" --format json | grep -q '"elastic_max": 3' ||
  fail "prism dump --json does not show the elastic range"
echo "elastic: all checks passed"
