#!/bin/bash
# Multi-host test: 3 hosts (network namespaces) on 1gbit links, the embedding classifier
# partitioned with the hybrid strategy (global batch 64; parameter servers on h0 and h1):
#   1. prism verify: the distributed run over the namespaces equals single-device training
#      (20 steps of zipf:100000,tokens=20,classes=10) -> exit 0
#   2. prism run of the plan for 30 steps with --metrics-out -> 30 lines, finite losses
# Tasks start in their host's namespace through --launcher 'ip netns exec PREFIX{host}'; prism
# itself runs inside h0's namespace (the coordinator's host).
#
# Usage: hybrid_test.sh [PRISM]   (else $PRISM, else build/tools/prism under the repository root)
# Exit: 0 pass, 1 fail, 77 skip (not root, or no network namespaces here).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PRISM=${1:-${PRISM:-$ROOT/build/tools/prism}}
[[ "$PRISM" = /* ]] || PRISM="$PWD/$PRISM"
export PRISM_NETNS_PREFIX=${PRISM_NETNS_PREFIX:-prism-hyb-}
export PRISM_NETNS_NO_TRAP=1
# shellcheck source=hosts.sh
source "$HERE/hosts.sh"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

MODEL="$ROOT/models/embedding_classifier.prism"
DATA="zipf:100000,tokens=20,classes=10"
LAUNCHER="ip netns exec ${PRISM_NETNS_PREFIX}{host}"
T_COMPILE=${PRISM_TEST_COMPILE_TIMEOUT:-120}
T_RUN=${PRISM_TEST_RUN_TIMEOUT:-300}

netns_require || exit $?
[[ -x "$PRISM" ]] || { echo "FAIL: prism binary not found at $PRISM (pass it as \$1 or \$PRISM)" >&2; exit 1; }

netns_test_begin


HELP=$(timeout 20 "$PRISM" --help 2>&1)
for sub in partition verify run; do
  grep -qE "^[[:space:]]+$sub([[:space:]]|\$)" <<<"$HELP" ||
    fail "$PRISM has no '$sub' subcommand (not in '$PRISM --help')"
done

netns_up 3 1gbit || exit $?

cat >"$TMP/cluster.yaml" <<EOF
hosts:
  - name: h0
    address: $(netns_addr 0)
    devices: [cpu:0]
    ps: 1
  - name: h1
    address: $(netns_addr 1)
    devices: [cpu:0]
    ps: 1
  - name: h2
    address: $(netns_addr 2)
    devices: [cpu:0]
network: { bandwidth: 1gbit }
EOF

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
cd "$TMP" || exit 1

run "$T_COMPILE" "$PRISM" partition "$MODEL" --cluster "$TMP/cluster.yaml" --strategy hybrid \
  --batch 64 --data "$DATA" -o "$TMP/plan.pb"

run "$T_RUN" ip netns exec "$(netns_name 0)" "$PRISM" verify "$MODEL" \
  --cluster "$TMP/cluster.yaml" --strategy hybrid --steps 20 --batch 64 --data "$DATA" \
  --launcher "$LAUNCHER"
echo "verify: the distributed run equals single-device training"

run "$T_RUN" ip netns exec "$(netns_name 0)" "$PRISM" run "$TMP/plan.pb" --data "$DATA" \
  --steps 30 --threads 1 --no-eval --metrics-out "$TMP/metrics.jsonl" --launcher "$LAUNCHER"

[[ -s "$TMP/metrics.jsonl" ]] || fail "prism run wrote no metrics to $TMP/metrics.jsonl"
"$PY" - "$TMP/metrics.jsonl" 30 <<'EOF' || fail "metrics check"
import json, math, sys
path, want = sys.argv[1], int(sys.argv[2])
rows = []
for n, line in enumerate(open(path), 1):
    line = line.strip()
    if not line:
        continue
    try:
        rows.append(json.loads(line))
    except ValueError as e:
        sys.exit(f"{path}:{n}: not JSON ({e}): {line[:80]}")
steps = [r for r in rows if "step" in r and "loss" in r]
if len(steps) != want:
    sys.exit(f"{path}: {len(steps)} step lines (with 'step' and 'loss'), expected {want}")
bad = [r for r in steps if not isinstance(r["loss"], (int, float)) or not math.isfinite(r["loss"])]
if bad:
    sys.exit(f"{path}: non-finite loss at steps {[r['step'] for r in bad][:5]}")
print(f"metrics: {len(steps)} steps, loss {steps[0]['loss']:.4f} -> {steps[-1]['loss']:.4f}")
EOF
echo "PASS"
