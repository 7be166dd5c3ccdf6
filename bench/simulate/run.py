#!/usr/bin/python3
"""The simulator's error: for mlp, cnn and embedding_classifier under each strategy that applies,
on local:1 and local:2 (--workers), the step time `prism simulate --profile P` predicts against
the one `prism train --cluster local:N` measures. Prints a markdown table for BENCHMARKS.md
(commands and progress on stderr).

The profile is measured first (`prism calibrate -o`), unless --profile names one; with
--calibrate-each, again right before each case, so that a case's prediction and its runs see the
machine in the same state (a shared virtual machine's speed drifts by a quarter within minutes).
A measured step is the median of the steps' time differences (the metrics' "time") after --warmup
steps, in each of --repeat runs of --steps steps; the table gives the median over runs and their
spread, and the share of the CPU time the hypervisor took from this machine during the runs
(steal, /proc/stat).

Usage: bench/simulate/run.py [--prism build/tools/prism] [--profile P] [--calibrate-each]
                             [--steps 200] [--repeat 3] [--batch 64] [--workers 1,2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Model, strategy, and the parameter servers the strategy needs.
CASES = [("mlp", "allreduce", 0), ("mlp", "ps", 1),
         ("cnn", "allreduce", 0), ("cnn", "ps", 1),
         ("embedding_classifier", "allreduce", 0), ("embedding_classifier", "hybrid", 1)]


def run(cmd, **kw):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
    return out.stdout


def cluster(workers, ps):
    return f"local:{workers}" + (f",ps={ps}" if ps else "")


def predicted(args, model, strategy, spec):
    out = run([args.prism, "simulate", os.path.join(ROOT, "models", model + ".prism"),
               "--cluster", spec, "--strategy", strategy, "--batch", str(args.batch),
               "--profile", args.profile, "--json"])
    return json.loads(out)["step_seconds"]


def measured(args, model, strategy, spec, work):
    metrics = os.path.join(work, "metrics.jsonl")
    run([args.prism, "train", os.path.join(ROOT, "models", model + ".prism"), "--cluster", spec,
         "--strategy", strategy, "--batch", str(args.batch), "--steps", str(args.steps),
         # The same profile as the prediction's, so the automatic partition count and bucket
         # size are the same plan's.
         "--profile", args.profile,
         "--threads", "1", "--metrics-out", metrics, "--quiet", "--no-eval"])
    times = []
    with open(metrics) as f:
        for line in f:
            record = json.loads(line)
            if "step" in record and "time" in record:
                times.append((record["step"], record["time"]))
    times.sort()
    steps = [b[1] - a[1] for a, b in zip(times, times[1:]) if a[0] >= args.warmup]
    return statistics.median(steps)


def cpu_times():
    """(steal, all) jiffies of this machine so far, or None where /proc/stat has no steal."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    return (fields[7], sum(fields[:8])) if len(fields) >= 8 else None


def steal_share(before, after):
    if not before or not after or after[1] == before[1]:
        return "-"
    return f"{(after[0] - before[0]) / (after[1] - before[1]) * 100:.0f}%"


def calibrate(args, path):
    run([args.prism, "calibrate", "--threads", "1", "-o", path])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prism", default=os.path.join(ROOT, "build", "tools", "prism"))
    parser.add_argument("--profile", default="")
    parser.add_argument("--calibrate-each", action="store_true",
                        help="calibrate again right before each case")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workers", default="1,2")
    args = parser.parse_args()
    if args.calibrate_each and args.profile:
        sys.exit("--calibrate-each measures its own profiles; --profile names one to keep")
    with tempfile.TemporaryDirectory() as work:
        if not args.profile:
            args.profile = os.path.join(work, "profile.json")
            calibrate(args, args.profile)
        profile = json.load(open(args.profile))
        when = ", calibrated again before each case" if args.calibrate_each else ""
        print(f"profile: {profile['machine']}{when}, batch {args.batch}, {args.steps} steps x "
              f"{args.repeat} runs per case\n")
        print("| model | strategy | cluster | predicted ms | measured ms (median, spread) "
              "| error | steal |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
        errors = []
        for workers in [int(w) for w in args.workers.split(",")]:
            for model, strategy, ps in CASES:
                spec = cluster(workers, ps)
                if args.calibrate_each:
                    calibrate(args, args.profile)
                p = predicted(args, model, strategy, spec)
                before = cpu_times()
                runs = [measured(args, model, strategy, spec, work) for _ in range(args.repeat)]
                steal = steal_share(before, cpu_times())
                m = statistics.median(runs)
                errors.append(abs(p - m) / m)
                print(f"| {model} | {strategy} | {spec} | {p * 1e3:.2f} | {m * 1e3:.2f} "
                      f"({min(runs) * 1e3:.2f}-{max(runs) * 1e3:.2f}) | "
                      f"{errors[-1] * 100:.0f}% | {steal} |", flush=True)
        print(f"\nmedian error {statistics.median(errors) * 100:.1f}% over {len(errors)} cases; "
              f"within 10% in {sum(e <= 0.10 for e in errors)}")


if __name__ == "__main__":
    main()
