#!/usr/bin/env bash
# --partitions search: the flags are checked, the plan carries a candidate per count (prism
# dump shows them), and real jobs (prism run of a plan, prism train --cluster) time each count
# inside the one job, log each one's median step, the fit and the choice, then train with the
# chosen count; prism verify finds the run equal to single-device training.
set -euo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

source "$source_dir/tests/job/expect-error.sh"
emb="$source_dir/models/embedding_classifier.prism"
data=zipf:100000,tokens=20,classes=10
expect_error "option --partitions: expected auto, search, or 0 or more row ranges per PS table (0: by size), got 'serch'" \
  "$prism" partition "$emb" --cluster local:2,ps=2 --partitions serch -o "$work/x.pb"
expect_error "option --search-partitions: it needs --partitions search, got --partitions auto" \
  "$prism" partition "$emb" --cluster local:2,ps=2 --search-partitions 1,2 -o "$work/x.pb"
expect_error "option --search-partitions: expected partition counts of at least 1" \
  "$prism" partition "$emb" --cluster local:2,ps=2 --partitions search --search-partitions 1,x \
  -o "$work/x.pb"
expect_error "option --search-partitions: 4 partitions is more than 2 (the cluster's 2 PS tasks" \
  "$prism" partition "$emb" --cluster local:2,ps=2 --partitions search --search-partitions 1,2,4 \
  -o "$work/x.pb"
expect_error "option --search-steps: expected at least 1 timed step, got 0" \
  "$prism" partition "$emb" --cluster local:2,ps=2 --partitions search --search-steps 0 -o "$work/x.pb"
expect_error "option --partitions search: the plan (--strategy hybrid) has no parameter-server table read by rows" \
  "$prism" partition "$source_dir/models/mlp.prism" --cluster local:2,ps=1 --partitions search \
  -o "$work/x.pb"
expect_error "option --partitions search with --sync async" \
  "$prism" partition "$emb" --cluster local:2,ps=2 --partitions search --sync async -o "$work/x.pb"
[ ! -e "$work/x.pb" ]

# The plan: three candidates, each with its row ranges of the table.
cluster=local:2,ps=4
"$prism" partition "$emb" --cluster $cluster --batch 256 --steps 20 --partitions search \
  --search-partitions 4,1,2 --search-steps 3 -o "$work/search.pb" | tee "$work/partition.txt"
grep -q "^  partition search: 1, 2, 4 row ranges per table, each timed in the job" "$work/partition.txt"
dump=$("$prism" dump "$work/search.pb"); head -14 <<<"$dump"
grep -q "^search .*--partitions search over 1, 2, 4: 2 warm-up and 3 timed steps each" <<<"$dump"
grep -q "4 partitions: emb ps:0 rows 0..25000 ps:1 rows 25000..50000 ps:2 rows 50000..75000 ps:3 rows 75000..100000" <<<"$dump"
"$prism" dump "$work/search.pb" --format json | python3 -c '
import json, sys
search = json.load(sys.stdin)["partition_search"]
assert [c["partitions"] for c in search["candidates"]] == [1, 2, 4], search
assert search["timed_steps"] == 3 and search["warmup_steps"] == 2, search
assert [len(v["shards"]) for c in search["candidates"] for v in c["variables"] if v["variable"] == "emb"] == [1, 2, 4]'

# prism run of the plan: three candidates timed, a choice among them, then 20 steps trained.
check_log() {
  python3 - "$1" "$2" <<'PY'
import re, sys
log = open(sys.argv[1]).read()
steps = int(sys.argv[2])
timed = re.findall(r"^partition search: (\d+) partitions: median step ([0-9.]+) ms over (\d+) steps$", log, re.M)
print(timed)
assert [int(p) for p, _, _ in timed] == [1, 2, 4], timed
assert all(float(ms) > 0 for _, ms, _ in timed), timed
assert re.search(r"^partition search: fit t\(P\) = a \(P - 1\) \+ b / P \+ c: a = [0-9.]+ ms, b = [0-9.]+ ms, c = [0-9.]+ ms$", log, re.M)
chosen = re.findall(r"^partition search: chose (\d+) partitions \([0-9.]+ s of search\)$", log, re.M)
assert len(chosen) == 1 and int(chosen[0]) in (1, 2, 4), chosen
chosen = int(chosen[0])
# The choice is the least of the logged curve over the candidates (the printed coefficients are
# rounded to 1 us: a near tie may go either way).
a, b, c = map(float, re.search(r"a = ([0-9.]+) ms, b = ([0-9.]+) ms, c = ([0-9.]+) ms", log).groups())
t = {p: a * (p - 1) + b / p + c for p in (1, 2, 4)}
assert t[chosen] <= min(t.values()) + 0.01, (t, chosen)
# The training ran on the chosen count: the servers holding rows applied every step, the
# others none.
applied = [int(v) for v in re.findall(r"^ps:\d+: version (\d+),", log, re.M)]
assert sorted(applied) == [0] * (4 - chosen) + [steps] * chosen, (applied, chosen)
assert re.search(rf"^done: {steps} steps", log, re.M), "no done line"
PY
}
timeout 200 "$prism" run "$work/search.pb" --data $data --no-eval \
  --metrics-out "$work/run.jsonl" >"$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
grep "partition search" "$work/run.log"
check_log "$work/run.log" 20
# The metrics are the training's only: the timed steps are not in them.
[ "$(wc -l <"$work/run.jsonl")" -eq 20 ]

# prism train --cluster with the search, then the search refused where a restart would need it.
timeout 200 "$prism" train "$emb" --cluster $cluster --batch 256 --data $data --steps 12 --no-eval \
  --partitions search --search-partitions 1,2,4 >"$work/train.log" 2>&1 ||
  { cat "$work/train.log"; exit 1; }
check_log "$work/train.log" 12
expect_error "--checkpoint-every with a plan made with --partitions search" \
  timeout 100 "$prism" run "$work/search.pb" --data $data --no-eval --checkpoint-every 5 \
  --checkpoint-dir "$work/ckpt"

# prism verify: the run, searched, equals single-device training with the same batches.
timeout 250 "$prism" verify "$emb" --cluster $cluster --batch 64 --data $data --steps 10 \
  --partitions search --search-partitions 1,2,4 | tee "$work/verify.txt"
grep -q "equal to single-device training" "$work/verify.txt"
