#!/usr/bin/env bash
# Elastic membership: a worker joins a running job (`prism task PLAN --join --coordinator
# HOST:PORT`). An --elastic 2:3 job loses worker:1 at step 20 and goes on with two; a new
# worker then joins: the coordinator names it worker:3, the membership grows back to three at a
# step boundary (logged), the metrics say 3, then 2, then 3 workers, training continues to the
# last step, and the new worker ends with exactly the variables of the others. A second joiner
# is refused (the job has its most workers). Both for an all-reduce model and one with
# parameter-server variables.
set -euo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d); trap 'pkill -KILL -f "$work/" 2>/dev/null || true; rm -rf "$work"' EXIT
source "$(dirname "$0")/expect-error.sh"
fail() { echo "$1"; [ -f "${2:-/dev/null}" ] && cat "$2"; exit 1; }


# wait_for FILE TEXT: until FILE says TEXT (bounded).
wait_for() {
  for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  fail "no '$2' within 60 s" "$1"
}

# NAME MODEL CLUSTER DATA STEPS
check() {
  local name=$1 model=$2 cluster=$3 data=$4 steps=$5 dir="$work/$1"
  mkdir -p "$dir"
  timeout 60 "$prism" partition "$source_dir/models/$model.prism" --cluster "$cluster" \
    --batch 96 --elastic 2:3 -o "$dir/plan.pb" >/dev/null
  PRISM_INJECT_FAULTS=worker:1:kill@20 timeout 150 "$prism" run "$dir/plan.pb" --data "$data" \
    --steps "$steps" --no-eval --metrics-out "$dir/metrics" --variables-out "$dir/vars" \
    >"$dir/log" 2>&1 &
  local job=$!
  wait_for "$dir/log" "membership 1 from step 20: 2 workers"
  local coordinator
  coordinator=$(grep -o -- "--join --coordinator [0-9.:]*" "$dir/log" | awk '{print $3}')
  timeout 150 "$prism" task "$dir/plan.pb" --join --coordinator "$coordinator" \
    >"$dir/joined.log" 2>&1 &
  local joiner=$!
  wait_for "$dir/log" "membership 2 from step [0-9]*: 3 workers (worker:0, worker:2, worker:3)"
  expect_error "the job has its most workers already (3 of --elastic's maximum 3)" \
    timeout 60 "$prism" task "$dir/plan.pb" --join --coordinator "$coordinator" >/dev/null
  wait $joiner || fail "$name: the joined worker failed" "$dir/joined.log"
  wait $job || fail "$name: the job failed" "$dir/log"
  grep -q "worker:3 joined from" "$dir/log" || fail "$name: the log does not say who joined" "$dir/log"
  python3 - "$dir/metrics" "$steps" <<'EOF' || exit 1
import itertools, json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
assert [l["step"] for l in lines] == list(range(1, int(sys.argv[2]) + 1)), "a line per step"
runs = [(k, len(list(g))) for k, g in itertools.groupby(int(l["workers"]) for l in lines)]
assert [k for k, _ in runs] == [3, 2, 3] and runs[0][1] == 20, "workers per step: " + str(runs)
assert all(math.isfinite(l["loss"]) for l in lines), "a loss is not finite"
print("workers per step:", ", ".join(f"{n} steps with {k}" for k, n in runs))
EOF
  for task in worker-2 worker-3; do
    same_variables "$dir/vars/worker-0/checkpoint.prism" "$dir/vars/$task/checkpoint.prism" ||
      fail "$name: $task's variables differ from worker:0's"
  done
  echo "$name: $(grep -o "membership 2 from step [0-9]*" "$dir/log"); workers 0, 2 and 3 end equal"
}

check mlp mlp local:3 fashion-mnist 1000
check embedding embedding_classifier local:3,ps=1 zipf:100000,tokens=20,classes=10 1000
echo "elastic-join: all checks passed"
