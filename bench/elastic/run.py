#!/usr/bin/python3
"""Elastic membership (--elastic): what it costs a step, and how long a lost worker stops the job.
Prints markdown tables for BENCHMARKS.md (commands and progress on stderr).

  (a) throughput: mlp (all-reduce) and the embedding classifier (hybrid, one PS), 3 workers on
      loopback with 1 thread each, global batch 96; samples/s between step --warmup and the last
      of --steps steps (a window of about 10 s), with and without --elastic 2:3, --repeat times
      (median, min and max).
  (b) recovery: the same elastic jobs with worker:1 killed at step --warmup (it kills itself:
      PRISM_INJECT_FAULTS); the time from the metrics line of that step to the next one (the loss
      found, the new membership, the group re-formed, the step redone) against the median step
      before it.

Usage: bench/elastic/run.py [--prism build/tools/prism] [--steps N] [--warmup W] [--repeat R]
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
BATCH = 96
MODELS = [("mlp", "local:3", "fashion-mnist"),
          ("embedding_classifier", "local:3,ps=1", "zipf:100000,tokens=20,classes=10")]


def log(text):
    print(text, file=sys.stderr, flush=True)


def run(cmd, env=None, timeout=600):
    log("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, timeout=timeout, env=env, stdout=subprocess.DEVNULL)


def partition(a, model, cluster, elastic, plan):
    extra = ["--elastic", "2:3"] if elastic else []
    run([a.prism, "partition", os.path.join(ROOT, "models", model + ".prism"), "--cluster",
         cluster, "--batch", str(BATCH), "-o", plan] + extra)


def steps_of(a, plan, data, metrics, fault=None):
    env = dict(os.environ)
    if fault:
        env["PRISM_INJECT_FAULTS"] = fault
    run([a.prism, "run", plan, "--data", data, "--steps", str(a.steps), "--threads", "1",
         "--no-eval", "--quiet", "--metrics-out", metrics], env=env)
    with open(metrics) as f:
        lines = [json.loads(l) for l in f if '"loss"' in l]
    return {l["step"]: l for l in lines}


def throughput(lines, first, last):
    seconds = lines[last]["time"] - lines[first]["time"]
    return (last - first) * BATCH / seconds


def spread(values, digits=0):
    return (f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f} to "
            f"{max(values):.{digits}f})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--prism", default=os.path.join(ROOT, "build", "tools", "prism"))
    parser.add_argument("--steps", type=int, default=1100)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    a = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="prism-bench-elastic-")
    rates, recovery = [], []
    for model, cluster, data in MODELS:
        measured = {}
        for elastic in (False, True):
            plan = os.path.join(tmp, f"{model}-{elastic}.pb")
            partition(a, model, cluster, elastic, plan)
            measured[elastic] = []
            for r in range(a.repeat):
                lines = steps_of(a, plan, data, os.path.join(tmp, f"m-{model}-{elastic}-{r}"))
                measured[elastic].append(throughput(lines, a.warmup, a.steps))
        ratio = statistics.median(measured[True]) / statistics.median(measured[False])
        rates.append((model, cluster, spread(measured[False]), spread(measured[True]), ratio))
        plan = os.path.join(tmp, f"{model}-True.pb")
        gaps, steps = [], []
        for r in range(a.repeat):
            lines = steps_of(a, plan, data, os.path.join(tmp, f"k-{model}-{r}"),
                             fault=f"worker:1:kill@{a.warmup}")
            assert lines[a.steps]["workers"] == 2
            gaps.append(lines[a.warmup + 1]["time"] - lines[a.warmup]["time"])
            steps.append(statistics.median(lines[s + 1]["time"] - lines[s]["time"]
                                           for s in range(1, a.warmup - 1)))
        recovery.append((model, spread([g * 1000 for g in gaps], 1),
                         spread([s * 1000 for s in steps], 2)))
    print(f"Throughput, 3 workers on loopback (1 thread each), global batch {BATCH}, samples/s "
          f"from step {a.warmup} to {a.steps}, median (min to max) of {a.repeat} runs:\n")
    print("| model | cluster | without --elastic | with --elastic 2:3 | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for model, cluster, plain, elastic, ratio in rates:
        print(f"| {model} | {cluster} | {plain} | {elastic} | {ratio:.3f} |")
    print(f"\nRecovery: worker:1 killed at step {a.warmup}; the step it interrupted, found, "
          f"re-formed and redone, against a step before it (ms, median (min to max) of "
          f"{a.repeat} runs):\n")
    print("| model | interrupted step (ms) | a step before (ms) |")
    print("| --- | --- | --- |")
    for model, gap, step in recovery:
        print(f"| {model} | {gap} | {step} |")


if __name__ == "__main__":
    main()
