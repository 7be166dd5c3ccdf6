#!/bin/bash
# prism calibrate --cluster over 3 hosts (network namespaces) on 100mbit links (a 64 kB tbf
# bucket, so that a megabyte meets the rate): a rank in each host's namespace through
# --launcher; the profile's links hold one ring of 3 at 100 Mbit/s, which moves no byte faster
# than the links' 80 ns (less a fifth for the bucket's burst), and not 20 times slower (a loaded
# machine made it 4 times), a latency of rings after the ranks' work and each size's time (its
# largest no faster than the links either); prism simulate reads
# the profile for a plan on those hosts.
#
# Usage: calibrate_links_test.sh [PRISM]   (else $PRISM, else build/tools/prism)
# Exit: 0 pass, 1 fail, 77 skip (not root, or no network namespaces here).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PRISM=${1:-${PRISM:-$ROOT/build/tools/prism}}
[[ "$PRISM" = /* ]] || PRISM="$PWD/$PRISM"
export PRISM_NETNS_PREFIX=${PRISM_NETNS_PREFIX:-prism-cal-}
export PRISM_NETNS_BURST=64kb
export PRISM_NETNS_NO_TRAP=1
# shellcheck source=hosts.sh
source "$HERE/hosts.sh"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

netns_require || exit $?
[[ -x "$PRISM" ]] || { echo "FAIL: prism binary not found at $PRISM" >&2; exit 1; }
netns_test_begin

netns_up 3 100mbit || exit $?
{
  echo "hosts:"
  for i in 0 1 2; do
    echo "  - { name: h$i, address: $(netns_addr "$i"), devices: [cpu:0], machine: this }"
  done
  echo "network: { bandwidth: 100mbit }"
} >"$TMP/cluster.yaml"

run 300 "$PRISM" calibrate --quick --models "$ROOT/models" --cluster "$TMP/cluster.yaml" \
  --launcher "ip netns exec ${PRISM_NETNS_PREFIX}{host}" -o "$TMP/profile.json"
"$PY" - "$TMP/profile.json" <<'PY' || exit 1
import json, sys
links = json.load(open(sys.argv[1]))["links"]
print("links:", links)
assert len(links) == 1, links
link = links[0]
assert link["bandwidth_bits_per_sec"] == 100_000_000 and link["ranks"] == 3, link
wire = 8 / 100e6  # seconds per byte at 100 Mbit/s
assert 0.8 * wire <= link["seconds_per_byte"] <= 20 * wire, (link["seconds_per_byte"], wire)
assert link["latency"] >= 0, link
# Rings after 1 ms of each rank's work: their latency, measured and no less than a byte's time.
assert link["wake_latency"] > 0, link
# Each size's time (--quick: 4 B, 64 KB, 1 MB), by the bytes each of the 3 ranks sent (4/3 of
# the size), increasing; the largest no faster a byte than the links' (less the burst's fifth).
rings = link["rings"]
sizes = [4, 65536, 1048576]
assert len(rings) == len(sizes), rings
assert all(abs(r["bytes"] - b * 4 / 3) <= 1e-6 * b for r, b in zip(rings, sizes)), rings
assert all(a["seconds"] > 0 for a in rings), rings
assert (rings[-1]["seconds"] - link["latency"]) / rings[-1]["bytes"] >= 0.8 * wire, rings
PY
run 60 "$PRISM" simulate "$ROOT/models/mlp.prism" --cluster "$TMP/cluster.yaml" \
  --strategy allreduce --batch 64 --profile "$TMP/profile.json"
echo ok
