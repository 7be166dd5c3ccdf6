#!/usr/bin/env bash
# prism simulate refuses what it cannot use, naming it: a profile file that is missing or has a
# bad field (the file and the field), --cluster or --data given with a plan, --data with --scale,
# a model without --cluster. A model simulates as prism train compiles it: the rows its steps read
# sampled from its data.
set -euo pipefail
prism=$1
models=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=../job/expect-error.sh
source "$(dirname "$0")/../job/expect-error.sh"
"$prism" partition "$models/mlp.prism" --cluster local:2 --strategy allreduce --batch 32 \
  --profile "$(dirname "$0")/synthetic-profile.json" -o "$work/plan.pb" >/dev/null
sed 's/"seconds_per_byte": 1e-09/"seconds_per_byte": "fast"/' \
  "$(dirname "$0")/synthetic-profile.json" >"$work/bad.json"
expect_error "$work/bad.json: field 'all_reduce.seconds_per_byte'" \
  "$prism" simulate "$work/plan.pb" --profile "$work/bad.json"
expect_error "$work/none.json: cannot read the profile" \
  "$prism" simulate "$work/plan.pb" --profile "$work/none.json"
expect_error "option --cluster: applies to a model" \
  "$prism" simulate "$work/plan.pb" --cluster local:2
expect_error "option --cluster: required" "$prism" simulate "$models/mlp.prism"
# A plan file simulates as the model compiled with the same flags does.
a=$("$prism" simulate "$work/plan.pb" --json --profile "$(dirname "$0")/synthetic-profile.json" |
  grep step_seconds)
b=$("$prism" simulate "$models/mlp.prism" --cluster local:2 --strategy allreduce --batch 32 --json \
  --profile "$(dirname "$0")/synthetic-profile.json" | grep step_seconds)
[ "$a" = "$b" ] || { echo "plan $a vs model $b"; exit 1; }
expect_error "option --data: applies to a model (.prism), and $work/plan.pb is a plan" \
  "$prism" simulate "$work/plan.pb" --data fashion-mnist
expect_error "option --data: not with --scale" \
  "$prism" simulate "$models/mlp.prism" --scale 1,2 --data fashion-mnist
# The embedding model's rows per step come from its data statement (Zipf token ids, of which a
# batch holds fewer distinct ones than uniform draws would): as `prism partition --data` with
# that data estimates them, and fewer bytes than the uniform draws of a plan partitioned without.
emb=$models/embedding_classifier.prism
flags=(--cluster local:2,ps=1 --strategy hybrid --batch 64
  --profile "$(dirname "$0")/synthetic-profile.json")
"$prism" partition "$emb" "${flags[@]}" --data "zipf:100000,tokens=20,classes=10" \
  -o "$work/sampled.pb" >/dev/null
"$prism" partition "$emb" "${flags[@]}" -o "$work/uniform.pb" >/dev/null
synthetic=$(dirname "$0")/synthetic-profile.json
"$prism" simulate "$emb" "${flags[@]}" --json >"$work/model.json"
"$prism" simulate "$work/sampled.pb" --profile "$synthetic" --json >"$work/sampled.json"
"$prism" simulate "$work/uniform.pb" --profile "$synthetic" --json >"$work/uniform.json"
"$prism" simulate "$emb" "${flags[@]}" --data "zipf:100,tokens=20,classes=10" --json \
  >"$work/small.json"
/usr/bin/python3 - "$work" <<'PY'
import json, sys
def load(name):
    out = json.load(open(f"{sys.argv[1]}/{name}.json"))
    return out["step_seconds"], [t["bytes_received"] for t in out["tasks"] if t["task"] == "worker:0"][0]
model, sampled, uniform, small = (load(n) for n in ("model", "sampled", "uniform", "small"))
assert model == sampled, (model, sampled)
assert model[1] < 0.75 * uniform[1], (model, uniform)
# --data replaces the model's: 100 token ids leave at most 100 rows (25.6 kB) to pull, where the
# model's own data has a worker pull about 86 kB (its all-reduce bucket is 38.4 kB in both).
assert model[1] - small[1] > 50e3, (small, model)
PY
echo ok
