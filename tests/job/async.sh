#!/usr/bin/env bash
# Asynchronous training (--sync async, --max-staleness S): the flags are checked, prism dump
# shows the mode, prism verify refuses it, and in real jobs with one worker slowed on purpose
# (slow@MS) the parameter server applies each push on arrival: with a bound no worker runs more
# than S steps ahead of the slowest, without one the fast workers make most of the job's pushes.
# A hybrid plan keeps its all-reduce variables synchronous (its workers run in lockstep).
# Counts, never times, are asserted.
set -euo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

source "$source_dir/tests/job/expect-error.sh"
mlp="$source_dir/models/mlp.prism"
expect_error "option --sync: expected sync or async, got 'later'" \
  "$prism" partition "$mlp" --cluster local:2,ps=1 --sync later -o "$work/x.pb"
expect_error "option --max-staleness 2: it bounds how far asynchronous workers run apart; it needs --sync async" \
  "$prism" partition "$mlp" --cluster local:2,ps=1 --max-staleness 2 -o "$work/x.pb"
expect_error "option --max-staleness -1: expected a number of steps, 0 or more" \
  "$prism" partition "$mlp" --cluster local:2,ps=1 --sync async --max-staleness -1 -o "$work/x.pb"
expect_error "option --sync async: no trained variable is on a parameter server (--strategy allreduce all-reduces every one" \
  "$prism" partition "$mlp" --cluster local:2,ps=1 --sync async --strategy allreduce -o "$work/x.pb"
expect_error "option --sync async: no trained variable is on a parameter server (--strategy hybrid" \
  "$prism" partition "$mlp" --cluster local:2,ps=1 --sync async --strategy hybrid -o "$work/x.pb"
expect_error "--sync async changes how the workers of a job wait for each other: it needs --cluster" \
  "$prism" train "$mlp" --sync async --steps 1
expect_error "prism verify checks that a plan trains exactly like one device, and --sync async" \
  "$prism" verify "$mlp" --cluster local:2,ps=1 --strategy ps --sync async
[ ! -e "$work/x.pb" ]
# The automatic strategy weighs only what compiles: hybrid and allreduce are refused (nothing for
# the servers to apply on arrival), so some variable goes to the parameter server.
"$prism" partition "$mlp" --cluster local:2,ps=1 --sync async --explain -o "$work/auto.pb" \
  >"$work/auto.out"
grep -q "allreduce  *refused: option --sync async: no trained variable" "$work/auto.out"
"$prism" dump "$work/auto.pb" --format json | python3 -c '
import json, sys
plan = json.load(sys.stdin)
assert any(v["placement"]["type"] == "ps" for v in plan["variables"] if v["trainable"]), plan'

"$prism" partition "$mlp" --cluster local:3,ps=1 --strategy ps --batch 96 --sync async \
  --max-staleness 2 -o "$work/bounded.pb" >/dev/null
"$prism" partition "$mlp" --cluster local:3,ps=1 --strategy ps --batch 96 --sync async \
  -o "$work/free.pb" >/dev/null
dump=$("$prism" dump "$work/bounded.pb"); head -7 <<<"$dump"
grep -q "^sync      async: parameter servers apply each worker's push on arrival (all-reduce variables stay synchronous); a worker runs at most 2 steps ahead of the slowest" <<<"$dump"
grep -q "^sync      async: .*; no bound on how far workers run apart" <<<"$("$prism" dump "$work/free.pb")"
"$prism" dump "$work/bounded.pb" --format json | python3 -c '
import json, sys
run = json.load(sys.stdin)["run"]
assert run["sync"] == "async" and run["max_staleness"] == 2 and run["backup_workers"] == 0, run'

# worker:2 sleeps 30 ms before each step; the others take a few ms.
steps=60
for plan in bounded free; do
  PRISM_INJECT_FAULTS=worker:2:slow@30 timeout 120 "$prism" run "$work/$plan.pb" \
    --data fashion-mnist --steps $steps --metrics-out "$work/$plan.jsonl" >"$work/$plan.log" 2>&1 ||
    { cat "$work/$plan.log"; exit 1; }
  grep -E "^(worker|ps):|^done" "$work/$plan.log"
done
python3 - "$work/bounded.log" "$work/free.log" $steps <<'EOF2'
import re, sys
steps = int(sys.argv[3])
def counts(path):
    log = open(path).read()
    ps = re.search(r"^ps:0: version (\d+), applied pushes by worker (\d+) (\d+) (\d+), "
                   r"dropped 0 0 0, largest lead (\d+) steps", log, re.M)
    runs = {int(m[1]): int(m[2]) for m in re.finditer(r"^worker:(\d): (\d+) steps run", log, re.M)}
    return int(ps[1]), list(map(int, ps.groups()[1:4])), int(ps[5]), runs
for name, path in (("bounded", sys.argv[1]), ("free", sys.argv[2])):
    version, applied, lead, runs = counts(path)
    print(name, "version", version, "applied", applied, "largest lead", lead, "steps run", runs)
    # Each push applied alone, on arrival: the version counts pushes, and the job ends once the
    # servers applied a push per worker and step (fast workers' in flight then come on top).
    assert version == sum(applied) and 3 * steps <= version < 3 * steps + 3, (version, applied)
    assert applied == [runs[w] for w in range(3)], (applied, runs)
    if name == "bounded":
        # Never more than 2 steps ahead of the slowest, and the slowed worker made the others
        # use that room: they were not in lockstep.
        assert 1 <= lead <= 2, lead
        assert max(applied) - min(applied) <= 3, applied
    else:
        # Nothing holds the fast workers back: they make most of the pushes.
        assert lead > 2, lead
        assert applied[2] < applied[0] and applied[2] < applied[1], applied
EOF2

# Hybrid: the table's pushes are applied on arrival, the dense layers stay all-reduced, so the
# workers run in lockstep and each runs every step.
emb="$source_dir/models/embedding_classifier.prism"
"$prism" partition "$emb" --cluster local:2,ps=1 --sync async --batch 64 -o "$work/hybrid.pb" >/dev/null
timeout 120 "$prism" run "$work/hybrid.pb" --steps 20 >"$work/hybrid.log" 2>&1 ||
  { cat "$work/hybrid.log"; exit 1; }
grep -E "^ps:0:" "$work/hybrid.log"
grep -q "^ps:0: version 40, applied pushes by worker 20 20, dropped 0 0, largest lead 0 steps" \
  "$work/hybrid.log"
