#!/usr/bin/env bash
# prism simulate --scale --plot writes an SVG through gnuplot (skipped, 77, when gnuplot is not
# installed; scripts/setup installs it), with a line per strategy; without gnuplot on the PATH,
# --plot is an error naming gnuplot.
set -euo pipefail
prism=$1
models=$2
command -v gnuplot >/dev/null || { echo "skipped: gnuplot is not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=../job/expect-error.sh
source "$(dirname "$0")/../job/expect-error.sh"
"$prism" simulate "$models/embedding_classifier.prism" --scale 1,2,16 --plot "$work/scale.svg" \
  --profile "$(dirname "$0")/synthetic-profile.json" >/dev/null
head -c 200 "$work/scale.svg" | grep -q "^<?xml"
grep -q "<svg" "$work/scale.svg"
for title in hybrid allreduce ps "scaling efficiency" "samples/s"; do
  grep -qF ">$title<" "$work/scale.svg" || { echo "no '$title' in the SVG"; exit 1; }
done
expect_error "option --plot: gnuplot is not installed" env PATH="$work" "$prism" simulate \
  "$models/embedding_classifier.prism" --scale 1 --plot "$work/none.svg"
[ ! -e "$work/none.svg" ]
echo ok
