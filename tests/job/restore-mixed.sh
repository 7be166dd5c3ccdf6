#!/usr/bin/env bash
# A checkpoint whose files were moved or mixed from two saves is refused with the reason, fast,
# instead of restoring the wrong rows (ps-0 and ps-1 swapped used to exit 0) or waiting out the
# RPC deadline (worker files from one save with PS files from another used to hang 61 s).
set -euo pipefail
TIMEOUT=60
source "$(dirname "$0")/embedding-job.sh"
run --steps 4 --save "$work/at4"
run --steps 2 --save "$work/at2"

# ps-0's files and ps-1's swapped.
cp -r "$work/at4" "$work/swapped"
for f in ps-0 ps-0.shards; do mv "$work/swapped/$f" "$work/swapped/$f.tmp"; done
for f in ps-1 ps-1.shards; do mv "$work/swapped/$f" "$work/swapped/${f/ps-1/ps-0}"; done
for f in ps-0 ps-0.shards; do mv "$work/swapped/$f.tmp" "$work/swapped/${f/ps-0/ps-1}"; done
if out=$(run --steps 6 --restore "$work/swapped" 2>&1); then
  echo "a checkpoint with ps-0 and ps-1 swapped was restored"; exit 1
fi
echo "$out" | tail -3
grep -q "is the checkpoint of ps:1, not of ps:0: the files of the checkpoint were moved or renamed\|is the checkpoint of ps:0, not of ps:1: the files of the checkpoint were moved or renamed" <<<"$out"

# The workers' files from the save at step 4, ps:0's from the save at step 2.
cp -r "$work/at4" "$work/mixed"
cp -r "$work/at2/ps-0" "$work/at2/ps-0.shards" "$work/mixed/"
start=$(date +%s)
if out=$(run --steps 6 --restore "$work/mixed" 2>&1); then
  echo "a checkpoint mixing two saves was restored"; exit 1
fi
echo "$out" | tail -3
grep -q "mixes saves: worker:[01]'s files are at step 4, ps:0's at step 2" <<<"$out"
elapsed=$(( $(date +%s) - start ))
[[ $elapsed -lt 30 ]] || { echo "took ${elapsed} s to refuse"; exit 1; }

# A PS whose two files come from different saves.
cp -r "$work/at4" "$work/halves"
cp "$work/at2/ps-1.shards" "$work/halves/"
if out=$(run --steps 6 --restore "$work/halves" 2>&1); then
  echo "a PS checkpoint mixing two saves was restored"; exit 1
fi
echo "$out" | tail -3
grep -q "the checkpoint of ps:1 mixes saves: .*ps-1.shards is at step 2, .*ps-1 at step 4" <<<"$out"
echo "moved and mixed checkpoints refused"
