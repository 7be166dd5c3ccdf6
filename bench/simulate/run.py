#!/usr/bin/python3
"""The simulator's error: for mlp, cnn and embedding_classifier under each strategy that applies,
on local:1 and local:2 (--workers), the step time `prism simulate --profile P` predicts against
the one `prism train --cluster local:N` measures. Prints a markdown table for BENCHMARKS.md
(commands and progress on stderr).

The profile is measured first (`prism calibrate -o`), unless --profile names one; with
--calibrate-each case, again right before each case, and with --calibrate-each run, before each
run, so that a prediction and the run it is held against see the machine in the same state (a
shared virtual machine's speed drifts by a quarter within minutes). A measured step is the median
of the steps' time differences (the metrics' "time") after --warmup steps, in each of --repeat
runs of --steps steps; the table gives the median over runs and their spread, and the share of
the CPU time the hypervisor took from this machine during the case (steal, /proc/stat). The error
is |predicted - measured| / measured of the medians, or with --calibrate-each run the median of
each run's error against its own prediction. Each case is also predicted from the same profile
less what --ablate names, against the same measured steps: its machine.step_spread (every
worker's step the median, as before the simulator waited for the slowest worker; the default)
or its ops timed as they are (every op by its kernel family's roofline).

Usage: bench/simulate/run.py [--prism build/tools/prism] [--profile P]
                             [--calibrate-each case|run] [--quick-calibration]
                             [--steps 200] [--repeat 3] [--batch 64] [--workers 1,2]
                             [--ablate step_spread|ops]
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


def predicted(args, model, strategy, spec, profile=None):
    out = run([args.prism, "simulate", os.path.join(ROOT, "models", model + ".prism"),
               "--cluster", spec, "--strategy", strategy, "--batch", str(args.batch),
               "--profile", profile or args.profile, "--json"])
    return json.loads(out)["step_seconds"]


def ablated(args):
    """args.profile less what --ablate names, beside it: its machine.step_spread (every worker's
    step the median) or its ops timed as they are (every op by its family's roofline)."""
    profile = json.load(open(args.profile))
    if args.ablate == "step_spread":
        profile["machine"].pop("step_spread", None)
    else:
        profile.pop("ops", None)
    path = args.profile + ".ablated.json"
    with open(path, "w") as f:
        json.dump(profile, f)
    return path


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
    run([args.prism, "calibrate", "--threads", "1", "-o", path] +
        (["--quick"] if args.quick_calibration else []))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prism", default=os.path.join(ROOT, "build", "tools", "prism"))
    parser.add_argument("--profile", default="")
    parser.add_argument("--calibrate-each", choices=["case", "run"], default=None,
                        help="calibrate again right before each case, or before each run (the "
                        "error is then the median of each run's against its own prediction)")
    parser.add_argument("--quick-calibration", action="store_true",
                        help="calibrate with --quick (a few seconds)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--ablate", choices=["step_spread", "ops"], default="step_spread",
                        help="what the last two columns predict without: the profile's step "
                        "spread, or its ops timed as they are")
    args = parser.parse_args()
    if args.calibrate_each and args.profile:
        sys.exit("--calibrate-each measures its own profiles; --profile names one to keep")
    with tempfile.TemporaryDirectory() as work:
        if not args.profile:
            args.profile = os.path.join(work, "profile.json")
            calibrate(args, args.profile)
        profile = json.load(open(args.profile))
        when = (f", calibrated again before each {args.calibrate_each}"
                if args.calibrate_each else "")
        quick = " (--quick)" if args.quick_calibration else ""
        machine = {k: v for k, v in profile["machine"].items() if k != "step_spread"}
        print(f"profile: {machine}{quick}{when}, batch {args.batch}, {args.steps} "
              f"steps x {args.repeat} runs per case\n")
        ablation = ("every step the median" if args.ablate == "step_spread"
                    else "every op by its roofline")
        print("| model | strategy | cluster | predicted ms (median, spread) | measured ms (median, "
              f"spread) | error | steal | predicted, {ablation} | its error |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        errors, medians = [], []
        for workers in [int(w) for w in args.workers.split(",")]:
            for model, strategy, ps in CASES:
                error, median_error = case(args, model, strategy, cluster(workers, ps), work)
                errors.append(error)
                medians.append(median_error)
        for name, e in (("", errors), (", " + ablation, medians)):
            print(f"\nmedian error{name} {statistics.median(e) * 100:.1f}% over {len(e)} cases; "
                  f"within 10% in {sum(x <= 0.10 for x in e)}")


def spread(values):
    return (f"{statistics.median(values) * 1e3:.2f} "
            f"({min(values) * 1e3:.2f}-{max(values) * 1e3:.2f})")


def case(args, model, strategy, spec, work):
    """Predicts and measures one case, prints its row, and returns its error."""
    if args.calibrate_each == "case":
        calibrate(args, args.profile)
    before = cpu_times()
    predictions, medians, runs = [], [], []
    for i in range(args.repeat):
        if args.calibrate_each == "run" or i == 0:
            if args.calibrate_each == "run":
                calibrate(args, args.profile)
            p = predicted(args, model, strategy, spec)
            q = predicted(args, model, strategy, spec, ablated(args))
        predictions.append(p)
        medians.append(q)
        runs.append(measured(args, model, strategy, spec, work))
    steal = steal_share(before, cpu_times())

    def error_of(predictions):
        if args.calibrate_each == "run":  # each run against the prediction made right before it
            return statistics.median(abs(p - m) / m for p, m in zip(predictions, runs))
        m = statistics.median(runs)
        return abs(predictions[0] - m) / m

    error, median_error = error_of(predictions), error_of(medians)
    print(f"| {model} | {strategy} | {spec} | {spread(predictions)} | {spread(runs)} | "
          f"{error * 100:.0f}% | {steal} | {spread(medians)} | {median_error * 100:.0f}% |",
          flush=True)
    return error, median_error


if __name__ == "__main__":
    main()
