#!/usr/bin/python3
"""Asynchronous training and backup workers with one worker slowed to half speed: the examples
per second the parameter server applies and the test accuracy of synchronous training,
--backup-workers 1 and --sync async (with and without --max-staleness), in one run. Prints
markdown tables for BENCHMARKS.md (commands and progress on stderr).

mlp, 3 workers and 1 parameter server on loopback (`local:3,ps=1`, --strategy ps), global batch
96 (32 per worker), one thread per task, Fashion-MNIST. worker:2 sleeps before each step as long
as a step of an unhindered synchronous job takes (measured first), so it runs at about half
speed (the test-only fault `slow@MS`, PRISM_INJECT_FAULTS).

  (a) speed: the parameter server's count of the examples it applied, over the time from its
      first apply to its last (its log line), in runs sized to last at least --window seconds,
      --repeat times (median and spread).
  (b) accuracy: worker:0's test accuracy after --epochs epochs, for --seeds seeds (median,
      spread), with the same slowed worker.

Usage: bench/async/run.py [--prism build/tools/prism] [--window 12] [--repeat 3] [--epochs 2]
                          [--seeds 0,1,2] [--skip-accuracy] [--skip-speed]
"""
import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "distributed"))
import run as common  # noqa: E402  (bench/distributed/run.py: commands, formatting)

CLUSTER, BATCH = "local:3,ps=1", 96
MODES = [("sync", []), ("--backup-workers 1", ["--backup-workers", "1"]),
         ("--sync async --max-staleness 4", ["--sync", "async", "--max-staleness", "4"]),
         ("--sync async", ["--sync", "async"])]
PS_LINE = re.compile(r"^ps:0: version (\d+), applied pushes by worker ([\d ]+), dropped ([\d ]+), "
                     r"largest lead (\d+) steps, (\d+) examples applied in ([\d.]+) s", re.M)


def partition(a, extra, seed, plan):
    common.run([a.prism, "partition", os.path.join(ROOT, "models", "mlp.prism"), "--cluster",
                CLUSTER, "--strategy", "ps", "--batch", str(BATCH), "--seed", str(seed),
                "-o", plan] + extra, timeout=300)


def job(a, plan, length, delay_ms, metrics=None):
    """Runs the plan with worker:2 slowed by delay_ms (none when 0); returns its output."""
    env = dict(common.ENV)
    if delay_ms > 0:
        env["PRISM_INJECT_FAULTS"] = f"worker:2:slow@{delay_ms}"
    cmd = [a.prism, "run", plan, "--data", "fashion-mnist", "--threads", "1"] + length
    if metrics:
        cmd += ["--metrics-out", metrics]
    return common.run(cmd, timeout=a.timeout, env=env)


def applied(out):
    """The parameter server's line: (examples applied, seconds, pushes by worker, dropped, lead)."""
    m = PS_LINE.search(out)
    if not m:
        raise common.Failed("no parameter server line in:\n" + out[-2000:])
    return (int(m[5]), float(m[6]), list(map(int, m[2].split())), list(map(int, m[3].split())),
            int(m[4]))


def calibrate(a, tmp):
    """A synchronous step's time with no worker slowed, in ms (the delay that halves a worker)."""
    plan = os.path.join(tmp, "calibrate.pb")
    partition(a, [], 0, plan)
    metrics = plan + ".jsonl"
    job(a, plan, ["--steps", "400"], 0, metrics)
    with open(metrics) as f:
        times = [json.loads(l)["time"] for l in f if '"samples_per_sec"' in l]
    step = statistics.median(b - a_ for a_, b in zip(times[50:], times[51:]))
    return max(1, round(1000 * step))


def speed(a, tmp, delay):
    common.log(f"== (a) speed: worker:2 sleeps {delay} ms per step")
    rows = []
    for label, extra in MODES:
        plan = os.path.join(tmp, f"speed-{len(rows)}.pb")
        partition(a, extra, 0, plan)
        examples, seconds, *_ = applied(job(a, plan, ["--steps", "100"], delay))
        # Global batches in a window of --window seconds (async: a push is a third of one).
        steps = math.ceil(a.window / max(seconds, 1e-3) * examples / BATCH)
        rates, last = [], None
        for _ in range(a.repeat):
            last = applied(job(a, plan, ["--steps", str(steps)], delay))
            rates.append(last[0] / last[1])
        rows.append((label, steps, rates, last))
    print(f"### Examples applied per second, worker:2 at half speed (mlp, {CLUSTER}, --strategy "
          f"ps, global batch {BATCH}, one thread per task; {a.repeat} runs of at least "
          f"{a.window} s each)\n")
    print("| synchronization | steps | examples/s (median) | spread | vs sync | applied pushes by "
          "worker (last run) | dropped | largest lead |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    base = statistics.median(rows[0][2])
    for label, steps, rates, (_, _, pushes, dropped, lead) in rows:
        med = statistics.median(rates)
        print(f"| {label} | {steps} | {common.fmt(med)} | {common.fmt(min(rates))}–"
              f"{common.fmt(max(rates))} | {med / base:.2f}x | {' / '.join(map(str, pushes))} | "
              f"{' / '.join(map(str, dropped))} | {lead} |")
    print()
    sys.stdout.flush()


def accuracy(a, tmp, delay):
    common.log(f"== (b) accuracy after {a.epochs} epochs, worker:2 sleeps {delay} ms per step")
    seeds = [int(s) for s in a.seeds.split(",")]
    rows = []
    for label, extra in MODES:
        accs = []
        for seed in seeds:
            plan = os.path.join(tmp, f"acc-{len(rows)}-{seed}.pb")
            partition(a, extra, seed, plan)
            metrics = plan + ".jsonl"
            job(a, plan, ["--epochs", str(a.epochs)], delay, metrics)
            with open(metrics) as f:
                accs.append([json.loads(l)["test_accuracy"] for l in f
                             if '"test_accuracy"' in l][-1])
        rows.append((label, accs))
    print(f"### Test accuracy after {a.epochs} epochs, worker:2 at half speed (mlp, {CLUSTER}, "
          f"--strategy ps, global batch {BATCH}, Fashion-MNIST test set; seeds {a.seeds})\n")
    print("| synchronization | test accuracy (median) | spread | vs sync (medians) |")
    print("| --- | --- | --- | --- |")
    base = statistics.median(rows[0][1])
    for label, accs in rows:
        med = statistics.median(accs)
        print(f"| {label} | {med:.4f} | {min(accs):.4f}–{max(accs):.4f} | "
              f"{100 * (med - base):+.2f} points |")
    print()
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--prism", default=os.path.join(ROOT, "build", "tools", "prism"))
    p.add_argument("--window", type=float, default=12, help="seconds each timed run lasts at least")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per mode (default 3)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--seeds", default="0,1,2", help="accuracy runs per mode, one per seed")
    p.add_argument("--delay-ms", type=int, default=0,
                   help="worker:2's sleep per step (default: a measured synchronous step)")
    p.add_argument("--skip-accuracy", action="store_true")
    p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--timeout", type=int, default=1200, help="seconds per command")
    a = p.parse_args()
    common.begin(a, "bench/async/run.py")
    try:
        with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
            delay = a.delay_ms or calibrate(a, tmp)
            print(f"worker:2 sleeps {delay} ms before each step (a synchronous step of the "
                  f"unhindered job{' as given' if a.delay_ms else ', measured'}).\n")
            if not a.skip_speed:
                speed(a, tmp, delay)
            if not a.skip_accuracy:
                accuracy(a, tmp, delay)
    except common.Failed as e:
        sys.exit(f"run.py: a command failed: {e}")


if __name__ == "__main__":
    main()
