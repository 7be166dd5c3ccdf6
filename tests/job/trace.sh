#!/usr/bin/env bash
# Timelines: `prism run --trace DIR` makes every task write trace-event JSON, and `prism trace
# merge` joins them into one file in the trace-event format (checked field by field): a process
# per task, the tracks each has (ops, all-reduce buckets with their bytes, PS calls with theirs,
# steps with batch loading, PS applies), and clocks that line up across tasks.
set -euo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

source "$source_dir/tests/job/expect-error.sh"
expect_error "not a directory (give the DIR of \`--trace DIR\`)" "$prism" trace merge "$work/none"
expect_error "records the timelines of a job's tasks: it needs --cluster" \
  "$prism" train "$source_dir/models/mlp.prism" --steps 1 --trace "$work/t"
mkdir "$work/empty"
expect_error "no task traces (*.json) in it" "$prism" trace merge "$work/empty"

"$prism" partition "$source_dir/models/embedding_classifier.prism" --cluster local:2,ps=1 \
  --batch 64 -o "$work/plan.pb" >/dev/null
timeout 120 "$prism" run "$work/plan.pb" --data zipf:100000,tokens=20,classes=10 --steps 12 \
  --no-eval --quiet --trace "$work/trace"
ls "$work/trace"
for task in worker-0 worker-1 ps-0; do [ -s "$work/trace/$task.json" ]; done
"$prism" trace merge "$work/trace" -o "$work/trace/job.json"
"$prism" trace merge "$work/trace" -o "$work/trace/job.json" # its own output is left out
# However -o spells it; and a file of a task's name elsewhere is not the output.
(cd "$work" && "$prism" trace merge trace -o ./trace/../trace/job.json)
"$prism" trace merge "$work/trace" -o "$work/worker-0.json"
python3 -c "import json,sys; t=json.load(open(sys.argv[1])); assert t['otherData']['tasks'] == ['worker:0', 'worker:1', 'ps:0'], t['otherData']" "$work/worker-0.json"
python3 - "$work/trace/job.json" <<'PY'
import json, sys
trace = json.load(open(sys.argv[1]))
events = trace["traceEvents"]
assert trace["otherData"]["tasks"] == ["worker:0", "worker:1", "ps:0"], trace["otherData"]
processes, threads, spans = {}, {}, []
for e in events:
    assert isinstance(e["name"], str) and e["ph"] in ("X", "M") and isinstance(e["pid"], int), e
    assert isinstance(e["tid"], int), e
    if e["ph"] == "M":
        if e["name"] == "process_name":
            processes[e["pid"]] = e["args"]["name"]
        if e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
        continue
    assert isinstance(e["ts"], int) and isinstance(e["dur"], int) and e["dur"] >= 0, e
    assert isinstance(e["cat"], str), e
    spans.append(e)
assert processes == {0: "worker:0", 1: "worker:1", 2: "ps:0"}, processes
def on(task, track):
    pid = next(p for p, name in processes.items() if name == task)
    return [s for s in spans if s["pid"] == pid and threads[(pid, s["tid"])] == track]
for worker in ("worker:0", "worker:1"):
    steps = [s for s in on(worker, "steps") if s["cat"] == "step"]
    assert len(steps) == 12, len(steps)
    assert len([s for s in on(worker, "steps") if s["cat"] == "data"]) == 12
    ops = on(worker, "ops")
    assert {"op"} <= {s["cat"] for s in ops} and len(ops) >= 12 * 10, len(ops)
    reduces = on(worker, "all-reduce")
    assert reduces and all(s["args"]["bytes"] > 0 for s in reduces if s["name"] != "loss"), reduces[:2]
    ps = on(worker, "ps")
    assert {"ps_pull_rows", "ps_push"} <= {s["cat"] for s in ps}, {s["cat"] for s in ps}
    assert all(s["args"]["bytes_sent"] > 0 for s in ps), ps[:2]
applies = on("ps:0", "apply")
assert len(applies) == 12, len(applies)
# Aligned clocks: each step starts on both workers within 0.5 s (they meet in its all-reduce).
first = {w: sorted(s["ts"] for s in on(w, "steps") if s["cat"] == "step") for w in ("worker:0", "worker:1")}
skew = max(abs(a - b) for a, b in zip(first["worker:0"], first["worker:1"]))
assert skew < 500000, skew
print(f"{len(spans)} spans on {len(threads)} tracks of {len(processes)} tasks; step skew {skew} us")
PY
# The measured step against the predicted one: every worker's step first, spans both sides have
# (the ops by the same names), and the JSON of every span.
"$prism" simulate "$work/plan.pb" --trace-out "$work/predicted.json" >/dev/null
"$prism" trace compare "$work/trace" "$work/predicted.json" --skip 2 --top 5 | tee "$work/compare.txt"
grep -q "median of 10 measured steps a task" "$work/compare.txt"
[ "$(sed -n 3p "$work/compare.txt" | awk '{print $1, $2, $3, $4}')" = "worker:0 steps step N" ]
[ "$(sed -n 4p "$work/compare.txt" | awk '{print $1, $2, $3, $4}')" = "worker:1 steps step N" ]
"$prism" trace compare "$work/trace/job.json" "$work/predicted.json" --skip 2 --json \
  >"$work/compare.json"
python3 - "$work/compare.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["counted_steps"] == 10, c["counted_steps"]
both = {(s["task"], s["name"]) for s in c["spans"]
        if s["measured_seconds"] is not None and s["predicted_seconds"] is not None}
for task in ("worker:0", "worker:1"):
    for name in ("step N", "load batch", "bucket 0", "pull rows of emb", "push step N",
                 "fused_matmul %hidden", "apply_adam hidden.w"):
        assert (task, name) in both, (task, name, sorted(both))
assert ("ps:0", "apply step N") in both, sorted(both)
PY
expect_error "worker:0 has 12 steps; --skip 12 leaves none" \
  "$prism" trace compare "$work/trace" "$work/predicted.json" --skip 12
echo '{"traceEvents": []}' >"$work/empty.json"
expect_error "$work/empty.json: no steps" \
  "$prism" trace compare "$work/empty.json" "$work/predicted.json"
