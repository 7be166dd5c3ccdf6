#!/usr/bin/python3
"""What `--trace` costs: samples/s of the same plan with and without it, in alternating runs
(median and spread of --repeat runs each), and how many spans a step records. Prints a markdown
table for BENCHMARKS.md (commands on stderr).

  mlp (allreduce, 10000 steps: the smallest step, the most spans a millisecond), cnn (allreduce,
  300 steps) and embedding_classifier (hybrid, 1 PS, 2500 steps) on `local:2`, 1 thread per
  task, global batch 128, the first --warmup steps left out.

Usage: bench/trace/run.py [--prism build/tools/prism] [--steps N] [--repeat R]
"""
import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "distributed"))
import run as common  # noqa: E402  (bench/distributed/run.py: commands, formatting)

# model, strategy, cluster, data, steps (windows of 10 s or more here)
MODELS = [("mlp", "allreduce", "local:2", "fashion-mnist", 10000),
          ("cnn", "allreduce", "local:2", "fashion-mnist", 300),
          ("embedding_classifier", "hybrid", "local:2,ps=1", "zipf:100000,tokens=20,classes=10",
           2500)]


def samples_per_sec(metrics, batch, warmup):
    rows = [json.loads(l) for l in open(metrics) if l.startswith("{")]
    steady = [r for r in rows if r.get("samples_per_sec")][warmup:]
    return len(steady) * batch / sum(batch / r["samples_per_sec"] for r in steady)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--prism", default=os.path.join(ROOT, "build", "tools", "prism"))
    p.add_argument("--steps", type=int, default=0, help="steps per run (default: per model)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    a.prism = os.path.abspath(a.prism)
    common.ENV.update(common.MALLOC_ENV)
    G = 128
    print(f"Command: `{shlex.join(['bench/trace/run.py'] + sys.argv[1:])}` ({os.cpu_count()} "
          f"cores, load average {os.getloadavg()[0]:.2f} at start, {time.strftime('%Y-%m-%d')})\n")
    rows = []
    with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
        for model, strategy, cluster, data, steps in MODELS:
            steps = a.steps or steps
            plan = os.path.join(tmp, f"{model}.pb")
            common.run([a.prism, "partition", os.path.join(ROOT, "models", f"{model}.prism"),
                        "--cluster", cluster, "--strategy", strategy, "--batch", str(G), "-o",
                        plan], timeout=300)
            rates = {False: [], True: []}
            spans = 0
            for i in range(a.repeat):
                for traced in (False, True):
                    metrics = os.path.join(tmp, f"{model}-{i}-{traced}.jsonl")
                    cmd = [a.prism, "run", plan, "--data", data, "--steps", str(steps),
                           "--threads", "1", "--no-eval", "--quiet", "--metrics-out", metrics]
                    trace_dir = os.path.join(tmp, f"trace-{model}-{i}")
                    if traced:
                        cmd += ["--trace", trace_dir]
                    common.run(cmd, timeout=1200)
                    rates[traced].append(samples_per_sec(metrics, G, a.warmup))
                    if traced:
                        trace = json.load(open(os.path.join(trace_dir, "worker-0.json")))
                        spans = sum(1 for e in trace["traceEvents"] if e["ph"] == "X") / steps
            rows.append((model, strategy, steps, rates, spans))
    print(f"### Trace overhead (`local:2`, global batch {G}, {a.repeat} alternating runs each)\n")
    print("| model | strategy | steps | samples/s without | with `--trace` | overhead (medians) | "
          "spans per step (worker:0) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for model, strategy, steps, rates, spans in rows:
        off, on = statistics.median(rates[False]), statistics.median(rates[True])
        spread = lambda r: f"{common.fmt(min(r))}–{common.fmt(max(r))}"
        print(f"| {model} | {strategy} | {steps} | {common.fmt(off)} ({spread(rates[False])}) | "
              f"{common.fmt(on)} ({spread(rates[True])}) | {100 * (off - on) / off:+.1f}% | "
              f"{spans:.0f} |")
    print()


if __name__ == "__main__":
    main()
