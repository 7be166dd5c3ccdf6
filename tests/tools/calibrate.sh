#!/usr/bin/env bash
# prism calibrate --quick writes a profile that prism simulate reads (by --profile, and as the
# cached one under XDG_CACHE_HOME without -o), with measured, positive figures; an output it
# cannot write and a bad flag are errors naming them.
set -euo pipefail
prism=$1
models=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=../job/expect-error.sh
source "$(dirname "$0")/../job/expect-error.sh"
"$prism" calibrate --quick --threads 1 -o "$work/profile.json" --models "$models"
/usr/bin/python3 - "$work/profile.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["format"] == "prism-profile" and p["version"] == 1, p
assert p["machine"]["threads"] == 1 and p["machine"]["cores"] >= 1 and p["machine"]["host"] and p["machine"]["cpu"], p["machine"]
kernels = p["kernels"]
# The families the models' programs run, each fitted from its own timings.
for family in ("default", "matmul", "conv2d_backprop_filter"):
    assert family in kernels, sorted(kernels)
# Every family's figures are non-negative; those of the ops that do the models' work are measured
# (an op that costs no more than its dispatch, such as constant, may fit to zero: the executor's
# own part per op is timed apart).
for name, k in kernels.items():
    assert min(k["latency"], k["flops_per_second"], k["bytes_per_second"]) >= 0, (name, k)
for family in ("default", "matmul", "conv2d_backprop_filter"):
    k = kernels[family]
    assert k["latency"] > 0 or k["flops_per_second"] > 0 or k["bytes_per_second"] > 0, (family, k)
assert not any(n == "all_reduce" or n.startswith("ps_") for n in kernels), sorted(kernels)
assert p["all_reduce"]["latency"] + p["all_reduce"]["seconds_per_byte"] > 0, p["all_reduce"]
assert p["ps"]["bytes_per_second"] > 0, p["ps"]
# Passes over a bucket: out of the caches, and within half the core's L2 (a copy costs something
# per byte either way).
a = p["all_reduce"]
assert a["staging_seconds_per_byte"] > 0 and a["warm_staging_seconds_per_byte"] > 0, a
assert a["warm_staging_bytes"] >= 16384, a
# Row pulls and pushes were timed: their per-row figure is there (0 where rows cost no more than
# their bytes).
assert p["ps"]["seconds_per_row"] >= 0, p["ps"]
# Two clients pulled one variable at once: the share of a message the server moves one at a time.
assert 0 <= p["ps"]["serial_share"] <= 1, p["ps"]
# A row push's coalescing was timed: summing rows costs something per byte.
assert p["ps"]["coalesce_seconds_per_byte"] > 0 and p["ps"]["coalesce_latency"] >= 0, p["ps"]
# Row pulls asking for each id twice were timed: an id asked again costs no less than nothing.
assert p["ps"]["seconds_per_repeated_row"] >= 0, p["ps"]
# Batches are assembled from a data set in memory: a copy costs something per byte.
assert p["data"]["seconds_per_byte"] > 0 and p["data"]["latency"] >= 0, p["data"]
# How steps vary: 21 rising ratios to the median step, the middle one the median's own (the
# pooled samples are each model's and batch's steps over their median).
spread = p["machine"]["step_spread"]
assert len(spread) == 21 and spread == sorted(spread) and spread[0] > 0, spread
assert spread[0] <= 1 <= spread[-1] and abs(spread[10] - 1) < 0.1, spread
# Every op timed is kept as it is, by signature, at each batch timed (--quick: 16 and 64): mlp's
# first layer's weight gradient among them, no communication and no update from a sparse gradient.
ops = p["ops"]
assert any(s.startswith("matmul(f32[B, 784], f32[B, 256]) -> (f32[784, 256])") for s in ops), \
    sorted(ops)[:20]
for signature, times in ops.items():
    assert set(times) == {"16", "64"}, (signature, times)
    assert all(t >= 0 for t in times.values()), (signature, times)
    assert not signature.startswith(("all_reduce(", "ps_")), signature
PY
out=$("$prism" simulate "$models/mlp.prism" --cluster local:2 --strategy allreduce --batch 64 \
  --profile "$work/profile.json")
echo "$out"
grep -qF "profile: $work/profile.json" <<<"$out"
# Without -o the profile goes to the cache, and prism simulate uses it without --profile.
XDG_CACHE_HOME="$work/cache" "$prism" calibrate --quick --models "$models" >/dev/null
cached=$(ls "$work"/cache/prism/profile-*.json)
XDG_CACHE_HOME="$work/cache" "$prism" simulate "$models/embedding_classifier.prism" \
  --cluster local:2,ps=1 --strategy hybrid | grep -qF "profile: $cached"
# An output under a regular file cannot be written (whoever runs it, root included).
touch "$work/file"
expect_error "$work/file" "$prism" calibrate --quick -o "$work/file/p.json" --models "$models"
expect_error "option --threads: expected at least 1, got 0" "$prism" calibrate --threads 0
expect_error "option --models: $work/none is not a directory" \
  "$prism" calibrate --models "$work/none"
# --cluster: its links are timed through the hosts (tests/netns/calibrate_links_test.sh); a
# cluster without links is an error before measuring, and so is --launcher without --cluster. A
# rank that cannot start names its host, and no profile is written.
expect_error "option --cluster: local:2 has no links to measure" \
  "$prism" calibrate --quick --cluster local:2 -o "$work/none.json"
expect_error "--launcher requires --cluster" \
  "$prism" calibrate --quick --launcher "ip netns exec {host}" -o "$work/none.json"
cat >"$work/hosts.yaml" <<'YAML'
hosts:
  - { name: left, address: 10.99.0.1, devices: [cpu:0] }
  - { name: right, address: 10.99.0.2, devices: [cpu:0] }
network: { bandwidth: 1gbit }
YAML
expect_error "timing a ring over the links of 1gbit: the rank on left exited with status 3" \
  "$prism" calibrate --quick --models "$models" --cluster "$work/hosts.yaml" \
  --launcher "echo no such host {host} >&2; exit 3;" -o "$work/none.json"
[ ! -e "$work/none.json" ]
# A rank that prints something other than its sizes' times (here the launcher's own words, its
# {host} replaced by the host's name).
expect_error "the rank on left printed 'hello from left', not a size's times" \
  "$prism" calibrate --quick --models "$models" --cluster "$work/hosts.yaml" \
  --launcher "echo 'hello from {host}'; exit 0;" -o "$work/none.json"
[ ! -e "$work/none.json" ]
echo ok
