#!/usr/bin/env bash
# prism simulate refuses what it cannot use, naming it: a profile file that is missing or has a
# bad field (the file and the field), --cluster given with a plan, a model without --cluster.
set -euo pipefail
prism=$1
models=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=../job/expect-error.sh
source "$(dirname "$0")/../job/expect-error.sh"
"$prism" partition "$models/mlp.prism" --cluster local:2 --strategy allreduce --batch 32 \
  --profile "$(dirname "$0")/synthetic-profile.json" -o "$work/plan.pb" >/dev/null
sed 's/"seconds_per_byte": 1e-09/"seconds_per_byte": "fast"/' \
  "$(dirname "$0")/synthetic-profile.json" >"$work/bad.json"
expect_error "$work/bad.json: field 'all_reduce.seconds_per_byte'" \
  "$prism" simulate "$work/plan.pb" --profile "$work/bad.json"
expect_error "$work/none.json: cannot read the profile" \
  "$prism" simulate "$work/plan.pb" --profile "$work/none.json"
expect_error "option --cluster: applies to a model" \
  "$prism" simulate "$work/plan.pb" --cluster local:2
expect_error "option --cluster: required" "$prism" simulate "$models/mlp.prism"
# A plan file simulates as the model compiled with the same flags does.
a=$("$prism" simulate "$work/plan.pb" --json --profile "$(dirname "$0")/synthetic-profile.json" |
  grep step_seconds)
b=$("$prism" simulate "$models/mlp.prism" --cluster local:2 --strategy allreduce --batch 32 --json \
  --profile "$(dirname "$0")/synthetic-profile.json" | grep step_seconds)
[ "$a" = "$b" ] || { echo "plan $a vs model $b"; exit 1; }
echo ok
