#!/usr/bin/env bash
# The automatic choices from the command line: `--explain` prints each decision with its
# alternatives' predicted steps (from the profile given), `prism dump` shows them in text and
# JSON, given values turn them off, bad values are errors naming the flag, and `prism train`
# trains the plan it chose (a strategy refused by the cluster recorded with its reason).
set -euo pipefail
prism=$1
models=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=../job/expect-error.sh
source "$(dirname "$0")/../job/expect-error.sh"
profile="$(dirname "$0")/synthetic-profile.json"

expect_error "option --strategy: expected auto, hybrid, allreduce or ps, got 'fast'" \
  "$prism" partition "$models/mlp.prism" --cluster local:2 --strategy fast -o "$work/x.pb"
expect_error "option --partitions: expected auto, search, or 0 or more" \
  "$prism" partition "$models/mlp.prism" --cluster local:2 --partitions many -o "$work/x.pb"
expect_error "option --bucket-mb: expected auto or a positive size, got '-1'" \
  "$prism" partition "$models/mlp.prism" --cluster local:2 --bucket-mb -1 -o "$work/x.pb"
expect_error "option --profile: $work/none.json: cannot read the profile" \
  "$prism" partition "$models/mlp.prism" --cluster local:2 --profile "$work/none.json" \
  -o "$work/x.pb"
expect_error "option --partitions 8: a parameter server holds one row range of a table, and the cluster has 4 PS tasks (use at most 4)" \
  "$prism" partition "$models/embedding_classifier.prism" --cluster local:2,ps=4 --partitions 8 \
  -o "$work/x.pb"
[ ! -e "$work/x.pb" ]

# The embedding classifier on 2 workers and 4 servers: every stage decides.
"$prism" partition "$models/embedding_classifier.prism" --cluster local:2,ps=4 \
  --profile "$profile" --explain -o "$work/auto.pb" >"$work/auto.out"
grep -q "^decisions (predicted steps, profile $profile)" "$work/auto.out"
for subject in strategy "placement of emb" partitions bucket-mb; do
  grep -q "^  $subject: " "$work/auto.out" || { echo "no decision on $subject"; cat "$work/auto.out"; exit 1; }
done
"$prism" dump "$work/auto.pb" | grep -q "^  strategy: "
"$prism" dump "$work/auto.pb" --format json >"$work/auto.json"
/usr/bin/python3 - "$work/auto.json" "$work/auto.out" <<'PY'
import json, re, sys
plan = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
decisions = {d["subject"]: d for d in plan["decisions"]}
assert list(decisions) == ["strategy", "placement of emb", "partitions", "bucket-mb"], list(decisions)
for d in decisions.values():
    options = [a["option"] for a in d["alternatives"]]
    assert d["chosen"] in options, d
    steps = [a["step_seconds"] for a in d["alternatives"] if "step_seconds" in a]
    chosen = next(a for a in d["alternatives"] if a["option"] == d["chosen"])
    # Nothing is taken that another alternative beats by more than the 2% margin.
    assert chosen["step_seconds"] <= min(steps) * 1.02 + 1e-12, d
assert [a["option"] for a in decisions["strategy"]["alternatives"]] == ["hybrid", "allreduce", "ps"]
assert [a["option"] for a in decisions["partitions"]["alternatives"]] == ["1", "2", "4"]
# The plan is the one decided: the table's ranges, where the table went.
emb = next(v for v in plan["variables"] if v["name"] == "emb")
where = "ps" if decisions["placement of emb"]["chosen"] == "ps" else "allreduce"
assert emb["placement"]["type"] == where, emb["placement"]
if where == "ps":
    assert len(emb["placement"]["shards"]) == int(decisions["partitions"]["chosen"]), emb
# --explain prints the predicted milliseconds of every alternative.
assert len(re.findall(r"^    [* ] \S+ +[0-9.]+ ms", text, re.M)) == sum(
    len(d["alternatives"]) for d in decisions.values()), text
PY

# Given values: nothing to decide.
"$prism" partition "$models/embedding_classifier.prism" --cluster local:2,ps=4 --strategy hybrid \
  --partitions 0 --bucket-mb 25 -o "$work/given.pb" --explain >"$work/given.out"
! grep -q "^decisions" "$work/given.out"
"$prism" dump "$work/given.pb" --format json | grep -q '"decisions": \[\]'

# prism train on a cluster without parameter servers: hybrid and ps are refused (the table would
# need one), and the job trains the all-reduce plan.
"$prism" train "$models/embedding_classifier.prism" --cluster local:2 --steps 3 --batch 32 \
  --no-eval --profile "$profile" --explain >"$work/train.out" 2>&1 ||
  { cat "$work/train.out"; exit 1; }
grep -q "strategy: allreduce" "$work/train.out"
grep -q "hybrid  *refused: strategy hybrid puts 'emb' on a parameter server, but the cluster has none" \
  "$work/train.out"
grep -q "^done: 3 steps" "$work/train.out"
echo ok
