#!/usr/bin/env bash
# prism simulate on a model under every strategy with two workers (local:2, a parameter server
# where the strategy uses one): finite, positive step time and samples/s, a task line per task,
# and a predicted trace that `prism trace` readers open (trace events on the workers' tracks).
set -euo pipefail
prism=$1
model=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for strategy in hybrid allreduce ps; do
  cluster=local:2,ps=1
  [ "$strategy" = allreduce ] && cluster=local:2
  "$prism" simulate "$model" --cluster "$cluster" --strategy "$strategy" --batch 32 --json \
    --profile "$(dirname "$0")/synthetic-profile.json" --trace-out "$work/trace.json" >"$work/out.json"
  /usr/bin/python3 - "$work/out.json" "$work/trace.json" "$strategy" <<'PY'
import json, math, sys
out = json.load(open(sys.argv[1]))
trace = json.load(open(sys.argv[2]))
strategy = sys.argv[3]
def positive(x, what):
    assert isinstance(x, (int, float)) and math.isfinite(x) and x > 0, f"{strategy}: {what} = {x}"
positive(out["step_seconds"], "step_seconds")
positive(out["samples_per_second"], "samples_per_second")
assert abs(out["samples_per_second"] * out["step_seconds"] - out["global_batch"]) < 1e-6 * out["global_batch"]
workers = [t for t in out["tasks"] if t["task"].startswith("worker:")]
assert len(workers) == 2, out["tasks"]
for t in out["tasks"]:
    for key in ("compute_seconds", "communication_seconds", "idle_seconds"):
        assert math.isfinite(t[key]) and t[key] >= 0, (strategy, t)
    assert t["compute_seconds"] <= out["step_seconds"] * (1 + 1e-9), (strategy, t)
for t in workers:
    positive(t["compute_seconds"], t["task"] + " compute_seconds")
    positive(t["bytes_sent"], t["task"] + " bytes_sent")
ops = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "op"]
assert ops, "no op spans in the predicted trace"
assert max(e["ts"] + e["dur"] for e in ops) - min(e["ts"] for e in ops) <= out["step_seconds"] * 1e6 + 2
PY
done
echo "ok: $(basename "$model")"
