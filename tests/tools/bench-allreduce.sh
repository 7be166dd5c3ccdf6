#!/usr/bin/env bash
# prism bench-allreduce: two processes on loopback time all-reduces of each size; each rank
# prints one JSON line per size, in order, with its rank, as many repeats as the other (at least
# the probe's) and positive times; with --work-us, each all-reduce follows that much work. Bad
# flags are errors naming them. Each ring: Gloo's, the weighted one a step's buckets take, and that
# one handed to a worker's all-reduce thread (its lines add the handover's median, within the call).
set -euo pipefail
prism=$1
work=$(mktemp -d)
peer=
trap '[ -n "$peer" ] && kill "$peer" 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=../job/expect-error.sh
source "$(dirname "$0")/../job/expect-error.sh"
for ring in gloo weighted worker; do
  port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  args=(--coordinator "127.0.0.1:$port" --bytes 4,64k,1M --seconds 0.2 --timeout 30 --ring "$ring")
  "$prism" bench-allreduce --rank 1 "${args[@]}" >"$work/rank1.out" &
  peer=$!
  "$prism" bench-allreduce --rank 0 "${args[@]}" >"$work/rank0.out"
  wait "$peer"
  peer=
  cat "$work/rank0.out" "$work/rank1.out"
  /usr/bin/python3 - "$work/rank0.out" "$work/rank1.out" <<'PY'
import json, sys
ranks = [[json.loads(l) for l in open(path)] for path in sys.argv[1:]]
for rank, rows in enumerate(ranks):
    assert [r["bytes"] for r in rows] == [4, 64000, 1000000], rows
    for r in rows:
        assert r["rank"] == rank and r["repeats"] >= 3, r
        assert 0 < r["min_s"] <= r["median_s"] <= r["max_s"] and r["seconds"] >= r["max_s"], r
assert [r["repeats"] for r in ranks[0]] == [r["repeats"] for r in ranks[1]], ranks
PY
  if [ "$ring" = worker ]; then
    /usr/bin/python3 - "$work/rank0.out" "$work/rank1.out" <<'PY'
import json, sys
for path in sys.argv[1:]:
    for r in map(json.loads, open(path)):
        assert 0 < r["handover_median_s"] <= r["max_s"], r
PY
  else
    ! grep -q handover "$work/rank0.out" "$work/rank1.out"
  fi
done
# After 2 ms of each rank's work per all-reduce, a 0.2 s window holds at most 100 of them.
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
args=(--coordinator "127.0.0.1:$port" --bytes 4 --seconds 0.2 --timeout 30 --work-us 2000)
"$prism" bench-allreduce --rank 1 "${args[@]}" >"$work/rank1.out" &
peer=$!
"$prism" bench-allreduce --rank 0 "${args[@]}" >"$work/rank0.out"
wait "$peer"
peer=
cat "$work/rank0.out"
/usr/bin/python3 - "$work/rank0.out" <<'PY'
import json, sys
[row] = [json.loads(l) for l in open(sys.argv[1])]
assert row["bytes"] == 4 and 3 <= row["repeats"] <= 100 and row["median_s"] > 0, row
PY
expect_error "option --work-us: expected 0 to 1000000 microseconds, got -1" \
  "$prism" bench-allreduce --rank 0 --coordinator 127.0.0.1:1 --bytes 4 --work-us -1
expect_error "option --rank: expected 0 to 1, got 2" \
  "$prism" bench-allreduce --rank 2 --coordinator 127.0.0.1:1 --bytes 4
expect_error "option --coordinator: expected HOST:PORT" \
  "$prism" bench-allreduce --rank 0 --coordinator localhost --bytes 4
expect_error "option --bytes: 2 is less than one float32" \
  "$prism" bench-allreduce --rank 0 --coordinator 127.0.0.1:1 --bytes 4,2
expect_error "option --bytes" "$prism" bench-allreduce --rank 0 --coordinator 127.0.0.1:1 --bytes 4x
expect_error "option --ring: expected gloo, weighted or worker, got 'nccl'" \
  "$prism" bench-allreduce --rank 0 --coordinator 127.0.0.1:1 --bytes 4 --ring nccl
expect_error "option --seconds: expected a positive time" \
  "$prism" bench-allreduce --rank 0 --coordinator 127.0.0.1:1 --bytes 4 --seconds 0
echo ok
