#!/usr/bin/env bash
# Compressed communication (--compress): the flags are checked, the plan and the estimate carry
# it, and real jobs on Fashion-MNIST send half the gradient bytes per step (the workers' own
# counters) while the test accuracy after one epoch stays within 0.5% of float32 (mlp, cnn).
# A hybrid plan compresses pushes and row pulls too.
set -euo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

source "$source_dir/tests/job/expect-error.sh"
mlp="$source_dir/models/mlp.prism"
expect_error "option --compress: expected none, fp16 or bf16, got 'int8'" \
  "$prism" partition "$mlp" --cluster local:2 --compress int8 -o "$work/x.pb"
expect_error "option --error-feedback: it needs --compress fp16 or bf16" \
  "$prism" partition "$mlp" --cluster local:2 --error-feedback -o "$work/x.pb"
expect_error "--compress fp16 compresses what the tasks of a job send each other: it needs --cluster" \
  "$prism" train "$mlp" --compress fp16 --steps 1
expect_error "compressed training is close to, not equal to, single-device training" \
  "$prism" verify "$mlp" --cluster local:2 --compress fp16
[ ! -e "$work/x.pb" ]

# The plan and its estimate: worker:0's bytes per step halve (the loss bucket stays f32).
"$prism" partition "$mlp" --cluster local:2 --batch 128 -o "$work/f32.pb" >/dev/null
"$prism" partition "$mlp" --cluster local:2 --batch 128 --compress fp16 --error-feedback \
  -o "$work/fp16.pb" >/dev/null
dump=$("$prism" dump "$work/fp16.pb"); head -12 <<<"$dump"
grep -q "^compress  fp16 on the wire: all-reduce buckets, PS pushes and row pulls, with error feedback" <<<"$dump"
"$prism" dump "$work/fp16.pb" --format json | grep -q '"compress": "fp16"'
sent() { "$prism" dump "$1" --format json | python3 -c '
import json, sys
plan = json.load(sys.stdin)
print(plan["estimate"]["bytes_per_step"]["worker:0"])'; }
python3 - "$(sent "$work/f32.pb")" "$(sent "$work/fp16.pb")" <<'EOF'
import sys
f32, fp16 = map(float, sys.argv[1:])
print(f"estimate: worker:0 moves {f32:.0f} B/step in f32, {fp16:.0f} in fp16")
assert abs(fp16 / f32 - 0.5) < 0.001, fp16 / f32
EOF

# One epoch of mlp and of the cnn on 2 workers, f32 and fp16 with error feedback: the test
# accuracy and the bytes each step sends.
for model in mlp cnn; do
  for run in f32 fp16; do
    compress=(); [ "$run" = fp16 ] && compress=(--compress fp16 --error-feedback)
    "$prism" partition "$source_dir/models/$model.prism" --cluster local:2 --batch 128 \
      "${compress[@]}" -o "$work/$model-$run.pb" >/dev/null
    timeout 200 "$prism" run "$work/$model-$run.pb" --data fashion-mnist --epochs 1 \
      --metrics-out "$work/$model-$run.jsonl" >"$work/$model-$run.log" 2>&1 ||
      { cat "$work/$model-$run.log"; exit 1; }
  done
  python3 - "$model" "$work/$model-f32.jsonl" "$work/$model-fp16.jsonl" <<'EOF'
import json, statistics, sys
def read(path):
    lines = [json.loads(l) for l in open(path)]
    steps = [l for l in lines if "bytes_sent" in l]
    accuracy = [l["test_accuracy"] for l in lines if "test_accuracy" in l][-1]
    return statistics.median(l["bytes_sent"] for l in steps), accuracy, len(steps)
model = sys.argv[1]
(f32_bytes, f32_acc, n32), (fp16_bytes, fp16_acc, n16) = read(sys.argv[2]), read(sys.argv[3])
print(f"{model} f32:  {n32} steps, {f32_bytes:.0f} bytes sent per step, test accuracy {f32_acc:.4f}")
print(f"{model} fp16: {n16} steps, {fp16_bytes:.0f} bytes sent per step, test accuracy {fp16_acc:.4f}")
assert n32 == n16 > 400
assert abs(fp16_bytes / f32_bytes - 0.5) < 0.001, fp16_bytes / f32_bytes
assert abs(fp16_acc - f32_acc) <= 0.005, (f32_acc, fp16_acc)
EOF
done

# Hybrid: the embedding's row pulls and pushes in bf16, its dense layers all-reduced in bf16.
emb="$source_dir/models/embedding_classifier.prism"
data=zipf:100000,tokens=20,classes=10
for run in f32 bf16; do
  compress=(); [ "$run" = bf16 ] && compress=(--compress bf16)
  "$prism" partition "$emb" --cluster local:2,ps=1 --batch 256 "${compress[@]}" \
    -o "$work/emb-$run.pb" >/dev/null
  timeout 200 "$prism" run "$work/emb-$run.pb" --data "$data" --steps 30 --no-eval \
    --metrics-out "$work/emb-$run.jsonl" >"$work/emb-$run.log" 2>&1 ||
    { cat "$work/emb-$run.log"; exit 1; }
done
python3 - "$work/emb-f32.jsonl" "$work/emb-bf16.jsonl" <<'EOF'
import json, statistics, sys
def read(path):
    lines = [json.loads(l) for l in open(path)]
    return (statistics.median(l["bytes_sent"] for l in lines),
            statistics.median(l["bytes_received"] for l in lines), lines[-1]["loss"])
(s32, r32, l32), (s16, r16, l16) = read(sys.argv[1]), read(sys.argv[2])
print(f"f32:  sent {s32:.0f}, received {r32:.0f} per step, last loss {l32:.4f}")
print(f"bf16: sent {s16:.0f}, received {r16:.0f} per step, last loss {l16:.4f}")
# Indices stay 8 bytes: more than half, well under three quarters.
assert 0.49 < s16 / s32 < 0.75 and 0.49 < r16 / r32 < 0.75, (s16 / s32, r16 / r32)
assert abs(l16 - l32) < 0.05 * abs(l32), (l32, l16)
EOF
