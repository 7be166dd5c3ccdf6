#!/usr/bin/env bash
# `prism partition` of a 100,000-op model (the ladder of bench/ir_scale, as text) on 4 workers
# and a PS task: the plan is written and reads back (prism dump verifies it), and it places the
# table on the PS task and every weight and bias in all-reduce; the automatic choices keep the
# defaults, saying why. (A 473,000-op model used not to
# partition in 90 s; ctest's timeout bounds this run, the time itself is in BENCHMARKS.md.)
set -euo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$source_dir/bench/ir_scale/ladder.py" 100000 >"$work/ladder.prism"
"$prism" partition "$work/ladder.prism" --cluster local:4,ps=1 -o "$work/plan.pb" --explain \
  >"$work/out"
grep -q "wrote $work/plan.pb: ladder, hybrid, between-graph, 4 workers, 1 PS" "$work/out"
# Too large to search a plan per candidate: the defaults, and the decisions say why.
grep -q "strategy: hybrid (the default: the model has [0-9]* ops" "$work/out"
grep -q "bucket-mb: 25.0 (the default: the model has" "$work/out"
"$prism" dump "$work/plan.pb" --format json >"$work/plan.json"
/usr/bin/python3 - "$work/plan.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
variables = plan["variables"]
kinds = [v["placement"]["type"] for v in variables]
# emb and its two adam slots on the PS task; out.w, a weight and a bias per layer
# ((100000 - 5 + 3) // 4 layers) and their slots all-reduced; the step counter replicated.
on_ps = sorted(v["name"] for v in variables if v["placement"]["type"] == "ps")
assert on_ps == ["emb", "emb.adam_m", "emb.adam_v"], on_ps
assert kinds.count("allreduce") == 3 * (1 + 2 * 24999), kinds.count("allreduce")
assert kinds.count("replicated") == 1, kinds.count("replicated")
workers = [t for t in plan["tasks"] if t["role"] == "worker"]
assert len(workers) == 4 and all(t["program"] == "worker" for t in workers)
print(f"100,000-op model partitioned: {len(variables)} variables, {len(workers)} workers")
PY
