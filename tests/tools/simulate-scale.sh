#!/usr/bin/env bash
# prism simulate MODEL --scale: the table and its JSON for 1, 2 and 16 workers (two 8-GPU hosts)
# under every strategy: efficiency 1 at one worker and at most 1 beyond, the global batch grows
# with the workers, one host up to 8 workers; 2 workers on one host all-reduce over NVLink, faster
# than 16 over a 10G link, and faster over 100G than 10G; a cluster file of GPU hosts simulates
# with the GPU's kernels; bad flags are errors naming them.
set -euo pipefail
prism=$1
models=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=../job/expect-error.sh
source "$(dirname "$0")/../job/expect-error.sh"
profile="$(dirname "$0")/synthetic-profile.json"
model="$models/embedding_classifier.prism"
"$prism" simulate "$model" --scale 1,2,16 --profile "$profile" >"$work/table.txt"
cat "$work/table.txt"
grep -q "8 GPUs per host (nominal H100 SXM), 10gbit links, 64 samples per worker" "$work/table.txt"
for strategy in hybrid allreduce ps; do
  grep -Eq "^ +1 +1  $strategy .* 1\.000$" "$work/table.txt"
  grep -Eq "^ +16 +2  $strategy " "$work/table.txt"
done
for link in 10G 100G; do
  "$prism" simulate "$model" --scale 1,2,4,...,16 --link "$link" --profile "$profile" --json \
    >"$work/$link.json"
done
/usr/bin/python3 - "$work/10G.json" "$work/100G.json" <<'PY'
import json, math, sys
slow, fast = (json.load(open(f)) for f in sys.argv[1:])
assert slow["link_bits_per_sec"] == 10_000_000_000 and fast["link_bits_per_sec"] == 100_000_000_000
points = slow["points"]
assert [p["workers"] for p in points] == [n for n in (1, 2, 4, 8, 16) for _ in range(3)], points
assert {p["strategy"] for p in points} == {"hybrid", "allreduce", "ps"}
for p in points:
    assert p["global_batch"] == 64 * p["workers"], p
    assert p["hosts"] == (p["workers"] + 7) // 8, p
    assert math.isfinite(p["step_seconds"]) and p["step_seconds"] > 0, p
    assert abs(p["samples_per_second"] * p["step_seconds"] - p["global_batch"]) < 1e-6 * p["global_batch"]
    assert p["efficiency"] <= 1 + 1e-9, p
    if p["workers"] == 1:
        assert abs(p["efficiency"] - 1) < 1e-12, p
def step(doc, workers, strategy):
    return next(p["step_seconds"] for p in doc["points"]
                if p["workers"] == workers and p["strategy"] == strategy)
# all-reduce of the 25.6 MB embedding: NVLink on one host, then the link between two.
assert step(slow, 2, "allreduce") < step(slow, 16, "allreduce")
assert step(fast, 16, "allreduce") < step(slow, 16, "allreduce")
assert step(fast, 8, "allreduce") == step(slow, 8, "allreduce")  # one host: no link used
PY
# A cluster file of GPU hosts partitions as one of CPU hosts does, and its workers' kernels are
# the GPU's: far less compute than on the same hosts' CPUs.
for kind in gpu cpu; do
  cat >"$work/$kind.yaml" <<YAML
hosts:
  - {name: h0, address: 10.0.0.1, devices: [$kind:0, $kind:1]}
  - {name: h1, address: 10.0.0.2, devices: [$kind:0, $kind:1]}
network: {bandwidth: 100gbit}
YAML
  "$prism" simulate "$models/mlp.prism" --cluster "$work/$kind.yaml" --strategy allreduce \
    --batch 64 --json --profile "$profile" >"$work/$kind-step.json"
done
/usr/bin/python3 - "$work/gpu-step.json" "$work/cpu-step.json" <<'PY'
import json, sys
gpu, cpu = (json.load(open(f)) for f in sys.argv[1:])
compute = lambda doc: doc["tasks"][0]["compute_seconds"]
assert len([t for t in gpu["tasks"] if t["task"].startswith("worker:")]) == 4, gpu["tasks"]
assert 0 < compute(gpu) < compute(cpu) / 10, (compute(gpu), compute(cpu))
PY
expect_error "option --scale: '0'" "$prism" simulate "$model" --scale 0
expect_error "option --scale: 'a,b'" "$prism" simulate "$model" --scale a,b
expect_error "option --scale: '4,2': counts must increase" "$prism" simulate "$model" --scale 4,2
expect_error "does not reach 12" "$prism" simulate "$model" --scale 1,2,...,12
expect_error "option --link: 'fast'" "$prism" simulate "$model" --scale 1 --link fast
expect_error "option --strategies: 'mirrored'" "$prism" simulate "$model" --scale 1 \
  --strategies hybrid,mirrored
expect_error "option --gpus-per-host: 0" "$prism" simulate "$model" --scale 1 --gpus-per-host 0
expect_error "option --cluster: not with --scale" "$prism" simulate "$model" --scale 1 \
  --cluster local:2
expect_error "option --link: applies with --scale" "$prism" simulate "$model" --cluster local:2 \
  --link 10G
"$prism" partition "$models/mlp.prism" --cluster local:2 --batch 32 -o "$work/plan.pb" >/dev/null
expect_error "option --scale: applies to a model" "$prism" simulate "$work/plan.pb" --scale 1,2
echo ok
