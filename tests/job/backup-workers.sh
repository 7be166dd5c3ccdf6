#!/usr/bin/env bash
# Backup workers (--backup-workers K): the flags are checked, every trained variable goes to the
# parameter servers (prism dump says so and why), prism verify refuses them, and in a real job
# with one worker slowed on purpose (slow@MS) each step applies the first workers - K pushes:
# the slowed worker's pushes are dropped and it skips to the servers' version, while the fast
# workers run every step. Counts, never times, are asserted.
set -euo pipefail
prism="$1"; source_dir="$2"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

source "$source_dir/tests/job/expect-error.sh"
mlp="$source_dir/models/mlp.prism"
expect_error "option --backup-workers 3: each step needs the gradient of at least one worker, and the job has 3 workers (use at most 2)" \
  "$prism" partition "$mlp" --cluster local:3,ps=1 --backup-workers 3 -o "$work/x.pb"
expect_error "option --backup-workers -1: expected a number of workers, 0 or more" \
  "$prism" partition "$mlp" --cluster local:3,ps=1 --backup-workers -1 -o "$work/x.pb"
expect_error "option --backup-workers 1: backup workers make synchronous steps wait for fewer workers; --sync async waits for none" \
  "$prism" partition "$mlp" --cluster local:3,ps=1 --backup-workers 1 --sync async -o "$work/x.pb"
expect_error "option --backup-workers 1: --strategy allreduce keeps variables in a ring all-reduce, which needs every worker each step" \
  "$prism" partition "$mlp" --cluster local:3,ps=1 --backup-workers 1 --strategy allreduce -o "$work/x.pb"
expect_error "option --backup-workers 1: the model all-reduces 'norm.moments' over the workers every step (a replica mean" \
  "$prism" partition "$source_dir/tests/models/sync_batch_norm_cnn.prism" --cluster local:3,ps=1 \
  --backup-workers 1 -o "$work/x.pb"
expect_error "--backup-workers 1 changes how the workers of a job wait for each other: it needs --cluster" \
  "$prism" train "$mlp" --backup-workers 1 --steps 1
expect_error "prism verify checks that a plan trains exactly like one device, and --backup-workers 1 lets steps use fewer than every worker's gradient" \
  "$prism" verify "$mlp" --cluster local:3,ps=1 --backup-workers 1
[ ! -e "$work/x.pb" ]

# The plan: hybrid (the default) becomes ps, and the dump says why.
"$prism" partition "$mlp" --cluster local:3,ps=1 --batch 96 --backup-workers 1 \
  -o "$work/backup.pb" >/dev/null
dump=$("$prism" dump "$work/backup.pb"); head -8 <<<"$dump"
grep -q "^strategy  ps, between-graph replication" <<<"$dump"
grep -q "^sync      sync with 1 backup worker: each step applies the first 2 of 3 workers' gradients, late ones are dropped; every trained variable is on the parameter servers (a ring all-reduce needs every worker)" <<<"$dump"
"$prism" dump "$work/backup.pb" --format json | python3 -c '
import json, sys
run = json.load(sys.stdin)["run"]
assert run["backup_workers"] == 1 and run["sync"] == "sync", run'
expect_error "--checkpoint-dir: the plan trains with --backup-workers 1, where workers are at different steps" \
  "$prism" run "$work/backup.pb" --data fashion-mnist --steps 2 --checkpoint-dir "$work/ckpt" --checkpoint-every 1

# worker:2 sleeps 40 ms before each step; the others take a few ms.
steps=80
PRISM_INJECT_FAULTS=worker:2:slow@40 timeout 120 "$prism" run "$work/backup.pb" \
  --data fashion-mnist --steps $steps --metrics-out "$work/backup.jsonl" >"$work/backup.log" 2>&1 ||
  { cat "$work/backup.log"; exit 1; }
grep -E "^(worker|ps):|^done" "$work/backup.log"
python3 - "$work/backup.log" "$work/backup.jsonl" $steps <<'EOF2'
import json, re, sys
log, metrics, steps = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3])
ps = re.search(r"^ps:0: version (\d+), applied pushes by worker (\d+) (\d+) (\d+), "
               r"dropped (\d+) (\d+) (\d+)", log, re.M)
version, applied, dropped = int(ps[1]), list(map(int, ps.groups()[1:4])), list(map(int, ps.groups()[4:7]))
workers = {int(m[1]): (int(m[2]), int(m[3]), int(m[4])) for m in re.finditer(
    r"^worker:(\d): (\d+) steps run, (\d+) pushes dropped \(late\), (\d+) steps skipped", log, re.M)}
print("version", version, "applied", applied, "dropped", dropped, "workers", workers)
assert version == steps, version
# Every step applied exactly 2 pushes; every push was applied or dropped.
assert sum(applied) == 2 * steps, applied
for w in range(3):
    assert applied[w] + dropped[w] == workers[w][0], (w, applied, dropped, workers)
    assert workers[w][1] == dropped[w], (w, workers, dropped)
# The slowed worker is late: its pushes are dropped and it skips steps, so it contributes fewer
# applied steps than each fast worker and runs fewer steps itself.
assert dropped[2] > 0 and workers[2][2] > 0, (dropped, workers)
assert applied[2] < applied[0] and applied[2] < applied[1], applied
assert workers[2][0] + workers[2][2] == steps, workers
# The fast workers are not held back: each ran more steps than the slowed one, and the job
# applied every step.
assert workers[0][0] > workers[2][0] and workers[1][0] > workers[2][0], workers
assert workers[0][0] + workers[0][2] == steps, workers
lines = [json.loads(l) for l in open(metrics)]
last = [l for l in lines if "pushes_dropped" in l][-1]
assert last["pushes_dropped"] == dropped[0] and last["steps_skipped"] == workers[0][2], last
assert [l for l in lines if "test_accuracy" in l], "worker:0 evaluated at the end"
EOF2

# prism train --cluster carries the flag into its plan.
timeout 120 "$prism" train "$mlp" --cluster local:3,ps=1 --backup-workers 2 --batch 96 \
  --data fashion-mnist --steps 20 >"$work/train.log" 2>&1 || { cat "$work/train.log"; exit 1; }
grep -E "^ps:0: version 20, applied pushes by worker" "$work/train.log"
