#!/usr/bin/env bash
# Plans for GPUs: `local:N,devices=gpu` and cluster files with gpu:N devices give a worker per
# GPU, which `prism dump` shows (text, JSON, DOT) with the host<->device bytes of a step; in-graph
# towers on a worker's GPUs show where they run and the bytes between the GPUs, and a worker's
# towers on CPUs and GPUs at once are refused; --tf32 on CPU devices is an error; and a job whose GPU this machine
# lacks fails naming the device, never training on the CPU instead. (On a machine with a GPU
# the last check is skipped.)
set -euo pipefail
prism=$1
models=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=../job/expect-error.sh
source "$(dirname "$0")/../job/expect-error.sh"

"$prism" partition "$models/mlp.prism" --cluster local:2,devices=gpu,ps=1 -o "$work/gpu.pb"
"$prism" dump "$work/gpu.pb" > "$work/gpu.txt"
grep -q "worker:0  worker on local0, 127.0.0.1:[0-9]*, devices gpu:0" "$work/gpu.txt"
grep -q "worker:1  worker on local1, 127.0.0.1:[0-9]*, devices gpu:1" "$work/gpu.txt"
grep -q "host<->device [0-9.]* [kM]B/step" "$work/gpu.txt"
"$prism" dump "$work/gpu.pb" --format json > "$work/gpu.json"
/usr/bin/python3 - "$work/gpu.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
tasks = {t["name"]: t for t in plan["tasks"]}
assert tasks["worker:0"]["devices"] == ["gpu:0"], tasks["worker:0"]
assert tasks["worker:1"]["devices"] == ["gpu:1"], tasks["worker:1"]
# The input batch (32 x 784 f32 and the labels) and the bucket both ways, at the least.
moved = tasks["worker:0"]["estimate"]["host_device_bytes_per_step"]
sent = tasks["worker:0"]["estimate"]["bytes_sent_per_step"]
assert moved > 32 * 784 * 4 + 2 * sent, moved
assert tasks["ps:0"]["estimate"]["host_device_bytes_per_step"] == 0
PY
"$prism" dump "$work/gpu.pb" --format dot | grep -q 'label="worker:1\\n127.0.0.1:[0-9]*\\ngpu:1'

grep -q "^  gpu  collectives and PS calls through host memory (Gloo, gRPC)$" "$work/gpu.txt"

# Two workers sharing one GPU: the dump says so.
"$prism" partition "$models/mlp.prism" --cluster local:2,devices=gpu:0 -o "$work/shared.pb"
"$prism" dump "$work/shared.pb" > "$work/shared.txt"
[ "$(grep -c "devices gpu:0" "$work/shared.txt")" -eq 2 ]
grep -q "gpu  collectives and PS calls through host memory (Gloo, gRPC); shares gpu:0 with worker:1" \
  "$work/shared.txt"
"$prism" dump "$work/shared.pb" --format json | /usr/bin/python3 -c '
import json, sys
tasks = {t["name"]: t for t in json.load(sys.stdin)["tasks"]}
assert tasks["worker:0"]["shares_gpu_with"] == ["worker:1"], tasks["worker:0"]
assert tasks["worker:1"]["gpu_communication"] == "host", tasks["worker:1"]
assert tasks["coordinator:0"]["gpu_communication"] is None'

# Two hosts of different addresses naming one machine, each with its gpu:0: one GPU, shared.
for machine in "" "    machine: box"; do
  cat > "$work/machine.yaml" <<EOF
hosts:
  - name: a
    address: 10.0.0.1
    devices: [gpu:0]
$machine
  - name: b
    address: 10.0.0.2
    devices: [gpu:0]
$machine
EOF
  "$prism" partition "$models/mlp.prism" --cluster "$work/machine.yaml" -o "$work/machine.pb"
  if [ -n "$machine" ]; then
    "$prism" dump "$work/machine.pb" | grep -q "shares gpu:0 with worker:1"
  elif "$prism" dump "$work/machine.pb" | grep -q "shares gpu:0"; then
    echo "hosts of two addresses naming no machine share their gpu:0" >&2
    exit 1
  fi
done

# The CPU plan has no host<->device bytes.
"$prism" partition "$models/mlp.prism" --cluster local:2 -o "$work/cpu.pb"
if "$prism" dump "$work/cpu.pb" | grep -q "host<->device"; then
  echo "a CPU plan shows host<->device bytes" >&2
  exit 1
fi

expect_error "'devices' in 'local:2,devices=gpu:x': expected gpu or gpu:K, got 'gpu:x'" \
  "$prism" partition "$models/mlp.prism" --cluster local:2,devices=gpu:x -o "$work/x.pb"

cat > "$work/two-gpus.yaml" <<'YAML'
hosts:
  - name: h0
    address: 127.0.0.1
    devices: [gpu:0, gpu:1]
YAML
# In-graph towers on a worker's two GPUs: the dump says where they run and what crosses between
# the GPUs: mlp's 814,124 bytes of parameters to the second GPU and its gradients back, and a
# few scalars (the loss, the seed of backward).
"$prism" partition "$models/mlp.prism" --cluster "$work/two-gpus.yaml" --replication in-graph \
  -o "$work/towers.pb" > /dev/null
"$prism" dump "$work/towers.pb" > "$work/towers.txt"
grep -q "a tower on each of gpu:0, gpu:1, combined on gpu:0 (values copied between the GPUs)" \
  "$work/towers.txt"
grep -q "between GPUs 1.6 MB/step" "$work/towers.txt"
"$prism" dump "$work/towers.pb" --format json | /usr/bin/python3 -c '
import json, sys
tasks = {t["name"]: t for t in json.load(sys.stdin)["tasks"]}
e = tasks["worker:0"]["estimate"]
assert 2 * 814124 <= e["device_copy_bytes_per_step"] <= 2 * 814124 + 64, e
# Both GPUs get the whole input batch (64 x 784 f32 and the labels).
assert e["host_device_bytes_per_step"] >= 2 * 64 * (784 + 1) * 4, e'

# Two towers sharing one GPU (local:N,...,towers=T): nothing crosses between GPUs, and the input
# batch goes to the GPU once.
"$prism" partition "$models/mlp.prism" --cluster local:1,devices=gpu:0,towers=2 \
  --replication in-graph -o "$work/shared-towers.pb" > /dev/null
"$prism" dump "$work/shared-towers.pb" > "$work/shared-towers.txt"
grep -q "devices gpu:0 gpu:0, program worker" "$work/shared-towers.txt"
grep -q "; 2 towers sharing gpu:0$" "$work/shared-towers.txt"
if grep -q "between GPUs" "$work/shared-towers.txt"; then
  echo "towers sharing a GPU show copies between GPUs" >&2
  exit 1
fi

cat > "$work/mixed.yaml" <<'YAML'
hosts:
  - name: h0
    address: 127.0.0.1
    devices: [cpu:0, gpu:0]
YAML
expect_error "worker:0 has the devices cpu:0, gpu:0: a worker's towers run on CPUs or on GPUs, not on both" \
  "$prism" train "$models/mlp.prism" --cluster "$work/mixed.yaml" --replication in-graph --steps 1

# PRISM_TASK_PROGRAM (scripts/gpu-bundle's wrappers set it): the tasks run through it.
cat > "$work/wrapper" <<SH
#!/usr/bin/env bash
echo "\$1" >> "$work/wrapped"
exec "$prism" "\$@"
SH
chmod +x "$work/wrapper"
PRISM_TASK_PROGRAM=$work/wrapper "$prism" train "$models/mlp.prism" --cluster local:2 --steps 1 \
  --no-eval > /dev/null
[ "$(grep -c '^task$' "$work/wrapped")" -eq 2 ] # the two workers (the coordinator runs in prism)

# One-device training on a named device: a bad name, or --device with --cluster, is an error.
expect_error "option --device: device 'tpu:1': expected cpu:N, cuda:N or gpu:N" \
  "$prism" train "$models/mlp.prism" --device tpu:1 --steps 1
expect_error "--device gpu:0 picks the device of one-device training; with --cluster the cluster" \
  "$prism" train "$models/mlp.prism" --device gpu:0 --cluster local:1 --steps 1
"$prism" train "$models/mlp.prism" --device cpu:0 --steps 1 --no-eval > "$work/cpu-train.txt"
grep -q ", on cpu:0, " "$work/cpu-train.txt"

# --tf32 is for GPUs' matrix products: on CPU devices, one or a job's, it is an error naming it.
expect_error "--tf32 makes a GPU's float32 matrix products use TF32; this program runs on cpu:0, not a GPU" \
  "$prism" train "$models/mlp.prism" --tf32 --steps 1 --no-eval
expect_error "worker:0 failed: error: --tf32 makes a GPU's float32 matrix products use TF32" \
  "$prism" train "$models/mlp.prism" --tf32 --cluster local:1 --steps 1 --no-eval

# --cuda-graphs records a GPU's kernels: on CPU devices it is an error naming it, from prism train
# and from a job's worker.
expect_error "--cuda-graphs records a GPU's kernels as CUDA graphs; this program runs on cpu:0, not a GPU" \
  "$prism" train "$models/mlp.prism" --cuda-graphs --steps 1 --no-eval
expect_error "worker:0 failed: error: --cuda-graphs records a GPU's kernels as CUDA graphs" \
  "$prism" train "$models/mlp.prism" --cuda-graphs --cluster local:1 --steps 1 --no-eval

if [ -e /dev/nvidia0 ]; then
  echo "a GPU is here: the check that a missing GPU is an error is skipped"
  exit 0
fi
# Either worker may fail first (cuda:0 or cuda:1): the message, not the index.
expect_error "was asked for, but this machine has no usable CUDA device" \
  "$prism" train "$models/mlp.prism" --cluster local:2,devices=gpu --steps 1
expect_error "device cuda:0 was asked for, but this" \
  "$prism" train "$models/mlp.prism" --device gpu:0 --steps 1
expect_error "device cuda:0 was asked for, but this" \
  "$prism" verify "$models/mlp.prism" --cluster local:1,devices=gpu --steps 1
# In-graph towers on two GPUs: the first tower's device is asked for, and named.
expect_error "device cuda:0 was asked for, but this" \
  "$prism" train "$models/mlp.prism" --cluster "$work/two-gpus.yaml" --replication in-graph \
  --steps 1
