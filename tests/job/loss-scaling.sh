#!/usr/bin/env bash
# fp16 compute with dynamic loss scaling, end to end, on any x86-64 CPU (fp16 operands are
# rounded to fp16 and multiplied in f32):
#  - the distributed fp16 run (2 workers, 2 towers each, 2 micro-batches) equals single-device
#    fp16 training within 1e-4 (fp16's rounding amplifies f32 summation-order differences more
#    than bf16's: 2.8e-5 measured, BENCHMARKS.md);
#  - with a huge initial scale the first steps overflow: they are skipped and the scale halves
#    on every task alike, so the scale, the counters and the variables still agree;
#  - prism train reports the final scale and the skipped steps;
#  - a PS-held variable is refused, naming what to do instead.
set -euo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
model="$source_dir/tests/models/small_cnn.prism"

out=$(timeout 240 "$prism" verify "$model" --data fashion-mnist --cluster local:2,devices=2 \
  --precision fp16 --accumulate 2 --steps 20 --batch 64 --tolerance 1e-4 2>&1)
echo "$out"
grep -q "equal to single-device training within 0.0001" <<<"$out"

# 2^28: backward overflows fp16 until the scale is down to about 2^23; it grows again every 4
# finite steps.
sed 's/adam(lr = 0.001)/adam(lr = 0.001, loss_scale = 268435456.0, loss_scale_interval = 4)/' \
  "$model" > "$work/overflow.prism"
grep -q loss_scale "$work/overflow.prism"
out=$(timeout 240 "$prism" train "$work/overflow.prism" --data fashion-mnist --precision fp16 \
  --steps 20 --batch 64 --no-eval 2>&1)
echo "$out"
skipped=$(sed -n 's/.*loss scale [0-9.e+]* (\([0-9]*\) steps\? skipped).*/\1/p' <<<"$out")
[[ -n "$skipped" && "$skipped" -ge 2 && "$skipped" -lt 20 ]] || { echo "expected some skipped steps, got '$skipped'"; exit 1; }
out=$(timeout 240 "$prism" verify "$work/overflow.prism" --data fashion-mnist --cluster local:2 \
  --precision fp16 --steps 20 --batch 64 --tolerance 1e-4 2>&1)
echo "$out"
grep -q "equal to single-device training within 0.0001" <<<"$out"

# The plan says so.
"$prism" partition "$model" --cluster local:2 --precision fp16 -o "$work/plan.pb" > /dev/null
"$prism" dump "$work/plan.pb" | grep -q "fp16 compute (matmul, conv) with f32 variables and dynamic loss scaling"

# Parameter servers would each need every task's verdict on the step: refused, with the way out.
if out=$("$prism" verify "$source_dir/models/embedding_classifier.prism" --cluster local:2,ps=1 \
  --strategy hybrid --data zipf:1000,tokens=20,classes=10 --precision fp16 --steps 2 2>&1); then
  echo "fp16 with a PS-held table was accepted"; exit 1
fi
echo "$out"
grep -q "loss scaling, which --precision fp16 adds, need --strategy allreduce" <<<"$out"
# The automatic strategy (the default) sees hybrid and ps refused for the same reason and
# all-reduces the table.
"$prism" partition "$source_dir/models/embedding_classifier.prism" --cluster local:2,ps=1 \
  --precision fp16 --explain -o "$work/auto.pb" >"$work/auto.out"
grep -q "strategy: allreduce" "$work/auto.out"
grep -q "hybrid  *refused: .*need --strategy allreduce" "$work/auto.out"
