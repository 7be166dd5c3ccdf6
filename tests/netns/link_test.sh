#!/bin/bash
# Self-test of hosts.sh: 3 hosts on 1gbit links; every pair answers ICMP echo; a 200 MiB TCP
# transfer h0 -> h1 is held to the tbf rate (never above 1000 Mbit/s; unshaped veth carries ~5
# Gbit/s here; a slow, loaded machine may be slower, which is not checked: speed belongs to
# bench/distributed); the interfaces' byte counters see it; after cleanup no namespace or
# interface of ours is left. Exit 77 (skip) when not root.
# Usage: link_test.sh   (PRISM_NETNS_PREFIX defaults to prism-link- here)
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PRISM_NETNS_PREFIX=${PRISM_NETNS_PREFIX:-prism-link-}
export PRISM_NETNS_NO_TRAP=1
# shellcheck source=hosts.sh
source "$HERE/hosts.sh"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
TOOL="$HERE/nettool.py"
MB=200
PORT=5201

netns_require || exit $?
netns_test_begin


netns_up 3 1gbit || exit $?
echo "up: $(ip netns list | grep -c "^${PRISM_NETNS_PREFIX}") namespaces"

for i in 0 1 2; do
  for j in 0 1 2; do
    ((i == j)) && continue
    timeout -k 2 15 ip netns exec "$(netns_name "$i")" "$PY" "$TOOL" ping "$(netns_addr "$j")" \
      --count 2 --timeout 2 >/dev/null || fail "h$i cannot reach h$j ($(netns_addr "$j"))"
  done
done
echo "ping: every pair answers"

tx0=$(netns_tx_bytes 0); rx1=$(netns_rx_bytes 1)
timeout -k 2 40 ip netns exec "$(netns_name 1)" "$PY" "$TOOL" recv "$(netns_addr 1)" $PORT \
  --timeout 30 >"$TMP/recv.json" &
recv_pid=$!
timeout -k 2 40 ip netns exec "$(netns_name 0)" "$PY" "$TOOL" send "$(netns_addr 1)" $PORT \
  --mb $MB --timeout 30 || fail "send h0 -> h1 failed"
wait "$recv_pid" || fail "receive on h1 failed"
tx=$(($(netns_tx_bytes 0) - tx0)); rx=$(($(netns_rx_bytes 1) - rx1))
echo "transfer: $(cat "$TMP/recv.json"); h0 tx_bytes +$tx, h1 rx_bytes +$rx"
"$PY" - "$TMP/recv.json" "$tx" "$rx" $MB <<'EOF' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
tx, rx, payload = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) << 20
ok = True
if r["bytes"] != payload:
    print(f"FAIL: received {r['bytes']} bytes, sent {payload}"); ok = False
if r["mbit_per_s"] > 1000:
    print(f"FAIL: {r['mbit_per_s']} Mbit/s: the 1gbit tbf limit is not in effect"); ok = False
for name, v in (("h0 tx_bytes", tx), ("h1 rx_bytes", rx)):
    if not payload <= v <= payload * 1.1:
        print(f"FAIL: {name} grew by {v}, expected the payload {payload} plus headers"); ok = False
sys.exit(0 if ok else 1)
EOF

netns_down
left=$(ip netns list | grep "^${PRISM_NETNS_PREFIX}")
[[ -z "$left" ]] || fail "namespaces left after netns_down: $left"
echo "PASS"
