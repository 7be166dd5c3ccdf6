#!/usr/bin/env python3
"""Step times of two prism builds on the same plans, runs alternating: the before and after of a
runtime change. `--cases` picks the plans that change touches:

  in-place    the plans whose all-reduces copy the most (a sole worker's dense embedding
              gradient; two workers' mlp bucket): all-reduces in place
  event-loop  plans whose workers share this machine's cores with Gloo's event loop: small
              all-reduce-bound steps, a large bucket, a hybrid plan, a compute-bound one
  pulls       plans whose workers pull variables whole from parameter servers
  row-pushes  plans whose workers push an embedding table's rows, each id once (a step's rows
              coalesced before the push)
  large-tensors  plans whose all-reduce buckets hold tensors of 1 MiB and more beside smaller
              ones (the embedding model's 26 MB bucket, lstm_lm's 10.8 MB, the transformer's
              2.9 MB), and mlp, whose buckets do not change: large tensors reduced in place
  ring        plans whose steps wait for the weighted ring: mlp's one bucket and two (a ring
              after a ring), on 2 and 4 workers, a 26 MB bucket, a hybrid plan's small bucket,
              a compute-bound one: the ring over its own connections

  bench/builds/run.py --prism build/tools/prism --before OLD/tools/prism --cases in-place
                      [--repeat 3]

Each run trains with --metrics-out; its step time is the median of the steps after the 20th, and
the table gives the median over the runs and their range, for each build and their ratio.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = {
    # model, strategy, cluster, data, steps (about 10 s or more a run of the faster build)
    "in-place": [
        ("embedding_classifier", "allreduce", "local:1", None, 10000),
        ("mlp", "allreduce", "local:2", None, 3000),
    ],
    "event-loop": [
        ("mlp", "allreduce", "local:2", None, 8000),
        ("mlp", "allreduce", "local:4", None, 4000),
        ("mlp", "ps", "local:2,ps=1", None, 2500),
        ("embedding_classifier", "allreduce", "local:2", None, 500),
        ("embedding_classifier", "hybrid", "local:2,ps=1", None, 6000),
        ("cnn", "allreduce", "local:2", None, 250),
    ],
    "large-tensors": [
        ("embedding_classifier", "allreduce", "local:2", None, 400),
        ("lstm_lm", "allreduce", "local:2", None, 100),
        ("transformer", "allreduce", "local:2", None, 600),
        ("mlp", "allreduce", "local:2", None, 8000),
    ],
    "ring": [
        ("mlp", "allreduce", "local:2", None, 8000),
        ("mlp", "allreduce", "local:2", None, 4000, ["--bucket-mb", "0.5"]),
        ("mlp", "allreduce", "local:4", None, 4000),
        ("embedding_classifier", "allreduce", "local:2", None, 500),
        ("embedding_classifier", "hybrid", "local:2,ps=1", None, 6000),
        ("cnn", "allreduce", "local:2", None, 250),
    ],
    "row-pushes": [
        ("embedding_classifier", "hybrid", "local:1,ps=1", None, 7000),
        ("embedding_classifier", "hybrid", "local:2,ps=1", None, 6000),
        ("embedding_classifier", "hybrid", "local:4,ps=1", None, 3000),
        ("embedding_classifier", "ps", "local:2,ps=1", None, 5000),
    ],
    "pulls": [
        ("mlp", "ps", "local:1,ps=1", None, 4000),
        ("mlp", "ps", "local:2,ps=1", None, 2000),
        ("mlp", "ps", "local:4,ps=1", None, 1000),
        ("cnn", "ps", "local:2,ps=1", None, 250),
    ],
}


def step_ms(prism, model, strategy, cluster, data, steps, extra=()):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = [prism, "train", os.path.join(ROOT, "models", model + ".prism"), "--cluster",
               cluster, "--strategy", strategy, "--batch", "64", "--steps", str(steps),
               "--threads", "1", "--metrics-out", metrics, "--quiet", "--no-eval"]
        if data:
            cmd += ["--data", data]
        cmd += list(extra)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times = sorted((r["step"], r["time"]) for r in map(json.loads, open(metrics))
                       if "step" in r and "time" in r)
    return 1e3 * statistics.median(b[1] - a[1] for a, b in zip(times, times[1:]) if a[0] >= 20)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prism", default=os.path.join(ROOT, "build", "tools", "prism"))
    p.add_argument("--before", required=True, help="the prism build to compare with")
    p.add_argument("--cases", choices=sorted(CASES), required=True)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    print("| model | strategy | cluster | before ms (median, range) | now ms (median, range) "
          "| before / now |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for model, strategy, cluster, data, steps, *extra in CASES[a.cases]:
        extra = extra[0] if extra else []
        runs = {"before": [], "now": []}
        for _ in range(a.repeat):
            runs["before"].append(step_ms(a.before, model, strategy, cluster, data, steps, extra))
            runs["now"].append(step_ms(a.prism, model, strategy, cluster, data, steps, extra))
        cell = {k: f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"
                for k, v in runs.items()}
        ratio = statistics.median(runs["before"]) / statistics.median(runs["now"])
        plan = " ".join([cluster] + extra)
        print(f"| {model} | {strategy} | {plan} | {cell['before']} | {cell['now']} "
              f"| {ratio:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
