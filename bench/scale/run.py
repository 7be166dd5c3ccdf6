#!/usr/bin/python3
"""Scale on paper: `prism simulate MODEL --scale 1,2,4,...,1024` for lstm_lm, resnet and
embedding_classifier on 8-GPU hosts over 10G and 100G links, under hybrid, allreduce and ps.
Writes an SVG per model and link into --out (default: this directory, where BENCHMARKS.md's
figures live) and prints a markdown table for BENCHMARKS.md: samples/s and scaling efficiency at
a few worker counts, and how long each sweep took to simulate (median and spread of --repeat
runs). Commands and progress go to stderr.

The built-in profile is used (the cache is pointed at an empty directory) unless --profile names
one, so the figures do not depend on the machine that draws them.

Usage: bench/scale/run.py [--prism build/tools/prism] [--profile P] [--out DIR] [--repeat 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODELS = ["lstm_lm", "resnet", "embedding_classifier"]
LINKS = ["10G", "100G"]
SCALE = "1,2,4,...,1024"
SHOWN = [8, 64, 1024]  # the worker counts the table shows


def run(cmd, env):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    start = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    seconds = time.monotonic() - start
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
    return out.stdout, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prism", default=os.path.join(ROOT, "build", "tools", "prism"))
    parser.add_argument("--profile", help="a cost profile (default: the built-in one)")
    parser.add_argument("--out", default=HERE, help="where the SVGs go")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each sweep, timed")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, XDG_CACHE_HOME=cache)
        rows = []
        for model in MODELS:
            for link in LINKS:
                svg = os.path.join(args.out, f"{model}-{link}.svg")
                cmd = [args.prism, "simulate", os.path.join(ROOT, "models", f"{model}.prism"),
                       "--scale", SCALE, "--link", link, "--json", "--plot", svg]
                if args.profile:
                    cmd += ["--profile", args.profile]
                times = []
                for _ in range(args.repeat):
                    out, seconds = run(cmd, env)
                    times.append(seconds)
                rows.append((model, link, json.loads(out), times))
    print(f"Profile: {rows[0][2]['profile']}; GPU: {rows[0][2]['gpu']}; "
          f"{rows[0][2]['gpus_per_host']} GPUs and {rows[0][2]['ps_per_host']} PS per host; "
          f"{rows[0][2]['batch_per_worker']} samples per worker.\n")
    heads = " | ".join(f"{n} workers" for n in SHOWN)
    print(f"| model | link | strategy | {heads} | sweep time (s) |")
    print("| --- | --- | --- | " + " | ".join("---:" for _ in SHOWN) + " | ---: |")
    for model, link, doc, times in rows:
        strategies = list(dict.fromkeys(p["strategy"] for p in doc["points"]))
        for strategy in strategies:
            cells = []
            for n in SHOWN:
                p = next(p for p in doc["points"] if p["workers"] == n and p["strategy"] == strategy)
                cells.append(f"{p['samples_per_second']:,.0f}/s ({p['efficiency']:.2f})")
            spread = f"{statistics.median(times):.1f} ({min(times):.1f}–{max(times):.1f})"
            print(f"| {model} | {link} | {strategy} | " + " | ".join(cells) + f" | {spread} |")


if __name__ == "__main__":
    main()
