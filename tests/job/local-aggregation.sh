#!/usr/bin/env bash
# Local aggregation per host on loopback: two hosts (127.0.0.1 and 127.0.0.2) with two workers
# each and a parameter server each. The flag's values are checked; the plan and its dump (text,
# JSON, DOT) name the hosts and their leaders; prism verify holds (hybrid; ps with accumulation);
# and each parameter server combines one push per host each step (2 contributors, the trace's
# apply spans), against one per worker (4) with --local-aggregation off.
set -euo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$source_dir/tests/job/expect-error.sh"
model="$source_dir/models/embedding_classifier.prism"
data=zipf:100000,tokens=20,classes=10
cat >"$work/two-hosts.yaml" <<'YAML'
hosts:
  - name: h0
    address: 127.0.0.1
    devices: [cpu:0, cpu:1]
    ps: 1
  - name: h1
    address: 127.0.0.2
    devices: [cpu:0, cpu:1]
    ps: 1
YAML
cluster="$work/two-hosts.yaml"

expect_error "option --local-aggregation: expected auto, on or off, got 'always'" \
  "$prism" partition "$model" --cluster "$cluster" --local-aggregation always -o "$work/x.pb"
expect_error "--local-aggregation on: it is for between-graph replication" \
  "$prism" partition "$model" --cluster "$cluster" --replication in-graph --local-aggregation on \
  -o "$work/x.pb"
expect_error "--local-aggregation on: no host runs more than one worker" \
  "$prism" partition "$model" --cluster local:2,ps=2 --local-aggregation on -o "$work/x.pb"
[ ! -e "$work/x.pb" ]

# The plan and its dumps.
"$prism" partition "$model" --cluster "$cluster" --batch 64 -o "$work/on.pb" | tee "$work/out"
grep -q "local aggregation: 2 hosts push and pull once for their workers" "$work/out"
"$prism" partition "$model" --cluster "$cluster" --batch 64 --local-aggregation off \
  -o "$work/off.pb" >/dev/null
text=$("$prism" dump "$work/on.pb")
grep -q "^local     aggregation per host: h0 (worker:0 leads worker:1), h1 (worker:2 leads worker:3)" \
  <<<"$text"
grep -q "ps_push_rows  emb  *worker:0 (loopback)" <<<"$text"
# (Into files first: grep -q leaves a pipe early, which pipefail would count as a failure.)
"$prism" dump "$work/off.pb" >"$work/off.txt"
grep -q "^local     aggregation per host off (--local-aggregation off)" "$work/off.txt"
"$prism" dump "$work/on.pb" --format dot >"$work/on.dot"
grep -q '"worker:1" -> "worker:0" .*style=dashed.*local aggregation' "$work/on.dot"
"$prism" dump "$work/on.pb" --format json >"$work/on.json"
"$prism" dump "$work/off.pb" --format json >"$work/off.json"
python3 - "$work/on.json" "$work/off.json" <<'PY'
import json, sys
on, off = (json.load(open(p)) for p in sys.argv[1:])
assert on["host_aggregation"] == [
    {"host": "h0", "leader": "worker:0", "members": ["worker:0", "worker:1"]},
    {"host": "h1", "leader": "worker:2", "members": ["worker:2", "worker:3"]}], on["host_aggregation"]
assert on["run"]["local_aggregation"] == "auto" and off["run"]["local_aggregation"] == "off"
assert off["host_aggregation"] == [] and off["estimate"]["local_aggregation"] == []
local = {h["host"]: h for h in on["estimate"]["local_aggregation"]}
assert local["h0"]["local_bytes_per_step"] > 0, local
link = lambda plan, host: next(l for l in plan["estimate"]["links"] if l["host"] == host)
for host in ("h0", "h1"):
    a, b = link(on, host)["bytes_out_per_step"], link(off, host)["bytes_out_per_step"]
    print(f"{host}: {a:.0f} B/step out with local aggregation, {b:.0f} without")
    assert a < b, (a, b)
PY

# prism verify: distributed equals single-device with local aggregation on.
timeout 200 "$prism" verify "$model" --cluster "$cluster" --batch 64 --data $data --steps 20 \
  | tee "$work/verify.txt"
grep -q "equal to single-device training" "$work/verify.txt"
timeout 200 "$prism" verify "$model" --cluster "$cluster" --batch 64 --data $data --steps 10 \
  --strategy ps --accumulate 2 --local-aggregation on | tee "$work/verify-ps.txt"
grep -q "equal to single-device training" "$work/verify-ps.txt"

# What each server combines per step: one push per host, or one per worker without.
contributors() { python3 - "$1" <<'PY'
import json, sys
trace = json.load(open(sys.argv[1]))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
counts = sorted({int(e["args"]["contributors"]) for e in events if e.get("cat") == "ps_apply"})
applies = sum(1 for e in events if e.get("cat") == "ps_apply")
print(",".join(map(str, counts)), applies)
PY
}
for mode in on off; do
  timeout 120 "$prism" run "$work/$mode.pb" --data $data --steps 8 --no-eval --quiet \
    --trace "$work/trace-$mode"
done
for ps in ps-0 ps-1; do
  read -r on applies < <(contributors "$work/trace-on/$ps.json")
  read -r off _ < <(contributors "$work/trace-off/$ps.json")
  echo "$ps: $applies steps applied, combining $on pushes each (local aggregation), $off without"
  [ "$applies" = 8 ] && [ "$on" = 2 ] && [ "$off" = 4 ]
done
echo "local aggregation: ok"
