#!/bin/bash
# Local aggregation per host over network namespaces: 2 hosts on 1gbit links, 2 workers and a
# parameter server each, the embedding classifier with the hybrid strategy (global batch 64):
#   1. prism verify with local aggregation: distributed equals single-device training (20 steps)
#   2. the bytes that leave and enter each host per step (its veth's counters, over the steps
#      between a 10-step and a 40-step run of the same plan, so start-up traffic cancels out),
#      with and without local aggregation, against the plan's estimate (rows per step sampled
#      from the data): within TOLERANCE (TCP/IP and HTTP/2 framing, acknowledgements and the
#      coordinator's heartbeats are not in the estimate, and the rows of the measured steps
#      differ from the sampled ones), and fewer with local aggregation than without.
# Tasks start in their host's namespace through --launcher 'ip netns exec PREFIX{host}'; prism
# itself runs inside h0's namespace (the coordinator's host).
#
# Usage: local_aggregation_test.sh [PRISM]   (else $PRISM, else build/tools/prism)
# Exit: 0 pass, 1 fail, 77 skip (not root, or no network namespaces here).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PRISM=${1:-${PRISM:-$ROOT/build/tools/prism}}
[[ "$PRISM" = /* ]] || PRISM="$PWD/$PRISM"
export PRISM_NETNS_PREFIX=${PRISM_NETNS_PREFIX:-prism-agg-}
export PRISM_NETNS_SUBNET=${PRISM_NETNS_SUBNET:-10.78.0}
export PRISM_NETNS_NO_TRAP=1
# shellcheck source=hosts.sh
source "$HERE/hosts.sh"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

MODEL="$ROOT/models/embedding_classifier.prism"
DATA="zipf:100000,tokens=20,classes=10"
LAUNCHER="ip netns exec ${PRISM_NETNS_PREFIX}{host}"
T_RUN=${PRISM_TEST_RUN_TIMEOUT:-300}
TOLERANCE=0.10

netns_require || exit $?
[[ -x "$PRISM" ]] || { echo "FAIL: prism binary not found at $PRISM" >&2; exit 1; }

netns_test_begin


netns_up 2 1gbit || exit $?
cat >"$TMP/cluster.yaml" <<YAML
hosts:
  - name: h0
    address: $(netns_addr 0)
    devices: [cpu:0, cpu:1]
    ps: 1
  - name: h1
    address: $(netns_addr 1)
    devices: [cpu:0, cpu:1]
    ps: 1
network: { bandwidth: 1gbit }
YAML
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
cd "$TMP" || exit 1

run "$T_RUN" ip netns exec "$(netns_name 0)" "$PRISM" verify "$MODEL" \
  --cluster "$TMP/cluster.yaml" --strategy hybrid --steps 20 --batch 64 --data "$DATA" \
  --local-aggregation on --launcher "$LAUNCHER"
echo "verify: the distributed run with local aggregation equals single-device training"

# Per host, its veth's tx and rx bytes before and after the plan ran STEPS steps.
measure() {
  local plan=$1 steps=$2 out=$3 i
  local -a before=() after=()
  for i in 0 1; do before+=("$(netns_tx_bytes "$i") $(netns_rx_bytes "$i")"); done
  run "$T_RUN" ip netns exec "$(netns_name 0)" "$PRISM" run "$plan" --data "$DATA" \
    --steps "$steps" --threads 1 --no-eval --quiet --launcher "$LAUNCHER"
  for i in 0 1; do after+=("$(netns_tx_bytes "$i") $(netns_rx_bytes "$i")"); done
  for i in 0 1; do echo "h$i ${before[$i]} ${after[$i]}"; done >"$out"
}
for mode in on off; do
  run 120 "$PRISM" partition "$MODEL" --cluster "$TMP/cluster.yaml" --strategy hybrid --batch 64 \
    --data "$DATA" --local-aggregation "$mode" -o "$TMP/$mode.pb"
  "$PRISM" dump "$TMP/$mode.pb" --format json >"$TMP/$mode.json" || fail "dump of $mode.pb"
  measure "$TMP/$mode.pb" 10 "$TMP/$mode-10.txt"
  measure "$TMP/$mode.pb" 40 "$TMP/$mode-40.txt"
done

"$PY" - "$TMP" "$TOLERANCE" <<'PY' || fail "bytes per step"
import json, sys
tmp, tolerance = sys.argv[1], float(sys.argv[2])
def counted(path):  # host -> (tx, rx) during the run
    out = {}
    for line in open(path):
        host, tx0, rx0, tx1, rx1 = line.split()
        out[host] = (int(tx1) - int(tx0), int(rx1) - int(rx0))
    return out
measured = {}
for mode in ("on", "off"):
    short, long = counted(f"{tmp}/{mode}-10.txt"), counted(f"{tmp}/{mode}-40.txt")
    plan = json.load(open(f"{tmp}/{mode}.json"))
    links = {l["host"]: l for l in plan["estimate"]["links"]}
    for host in ("h0", "h1"):
        out = (long[host][0] - short[host][0]) / 30
        into = (long[host][1] - short[host][1]) / 30
        est_out, est_in = links[host]["bytes_out_per_step"], links[host]["bytes_in_per_step"]
        measured[mode, host] = out + into
        print(f"local aggregation {mode:3} {host}: out {out:9.0f} B/step (estimate {est_out:9.0f}, "
              f"{out / est_out - 1:+.1%}), in {into:9.0f} B/step (estimate {est_in:9.0f}, "
              f"{into / est_in - 1:+.1%})")
        for what, got, want in (("out", out, est_out), ("in", into, est_in)):
            if abs(got / want - 1) > tolerance:
                sys.exit(f"{mode} {host} {what}: {got:.0f} B/step measured, {want:.0f} estimated")
for host in ("h0", "h1"):
    on, off = measured["on", host], measured["off", host]
    print(f"{host}: {on:.0f} B/step with local aggregation, {off:.0f} without ({on / off - 1:+.1%})")
    if not on < off:
        sys.exit(f"{host}: local aggregation did not lower the bytes on its link")
PY
echo "PASS"
