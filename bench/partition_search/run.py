#!/usr/bin/python3
"""--partitions search: what the in-job search measures for each partition count, what it
chooses, and what each count gives when the job is run with it fixed, in one run. Prints a
markdown table for BENCHMARKS.md (commands and progress on stderr).

  models/embedding_classifier.prism, --strategy hybrid, on --cluster (default local:2,ps=4:
  a server holds one row range of a table, so the counts stop at the PS tasks), global batch
  --batch, zipf:100000,tokens=20,classes=10, 1 thread per task.
  (a) fixed: `prism run` of a plan made with --partitions P for each P of --counts, --steps steps
      (samples/s after --warmup), --repeat runs alternating the counts: median and spread.
  (b) search: `prism run` of a plan made with --partitions search --search-partitions COUNTS
      --search-steps K, --repeat runs: each count's median step from worker:0's log (median
      over the runs), the fitted curve's value there, how often each count was chosen, and how
      long the search took.

Usage: bench/partition_search/run.py [--prism build/tools/prism] [--steps N] [--repeat R]
                                     [--counts 1,2,4] [--search-steps K]
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "distributed"))
import run as common  # noqa: E402  (bench/distributed/run.py: commands, formatting)

DATA = "zipf:100000,tokens=20,classes=10"
MODEL = os.path.join(ROOT, "models", "embedding_classifier.prism")


def partition(a, plan, extra):
    common.run([a.prism, "partition", MODEL, "--cluster", a.cluster, "--strategy", "hybrid",
                "--batch", str(a.batch), "-o", plan] + extra, timeout=300)


def fixed(a, tmp, counts):
    """samples/s per count: a list of runs each."""
    result = {p: [] for p in counts}
    for p in counts:
        partition(a, os.path.join(tmp, f"p{p}.pb"), ["--partitions", str(p)])
    for r in range(a.repeat):
        for p in counts:
            metrics = os.path.join(tmp, f"p{p}.jsonl")
            result[p].append(common.prism_run(a, os.path.join(tmp, f"p{p}.pb"), DATA, a.steps,
                                              a.batch, metrics))
            common.log(f"  fixed {p}: {result[p][-1]:.0f} samples/s (run {r + 1})")
    return result


def search(a, tmp, counts):
    """Per run: ({count: median ms}, (a, b, c) in ms, chosen count, seconds of search)."""
    plan = os.path.join(tmp, "search.pb")
    partition(a, plan, ["--partitions", "search", "--search-partitions",
                        ",".join(map(str, counts)), "--search-steps", str(a.search_steps)])
    runs = []
    for r in range(a.repeat):
        out = common.run([a.prism, "run", plan, "--data", DATA, "--steps", "5", "--threads", "1",
                          "--no-eval"], timeout=a.timeout)
        medians = {int(p): float(ms) for p, ms in re.findall(
            r"^partition search: (\d+) partitions: median step ([0-9.]+) ms", out, re.M)}
        fit = re.search(r"a = ([0-9.]+) ms, b = ([0-9.]+) ms, c = ([0-9.]+) ms", out)
        chosen = re.search(r"^partition search: chose (\d+) partitions \(([0-9.]+) s", out, re.M)
        if len(medians) != len(counts) or not chosen:
            raise common.Failed(f"no search lines in the output:\n{out[-2000:]}")
        runs.append((medians, tuple(map(float, fit.groups())) if fit else None,
                     int(chosen.group(1)), float(chosen.group(2))))
        common.log(f"  search run {r + 1}: {medians}, chose {runs[-1][2]}")
    return runs


def report(a, counts, fixed_runs, search_runs):
    print(f"### {a.cluster}, global batch {a.batch}: {a.steps} steps per fixed run (first "
          f"{a.warmup} left out), {a.search_steps} timed steps per count in the search, "
          f"{a.repeat} runs each\n")
    print("| partitions | fixed: samples/s (median) | spread | fixed: ms per step | "
          "search: median step (ms, median of runs) | spread | fitted t(P) (ms, median) | "
          "chosen |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for p in counts:
        rate = fixed_runs[p]
        steps = [m[p] for m, _, _, _ in search_runs]
        fitted = [f[0] * (p - 1) + f[1] / p + f[2] for _, f, _, _ in search_runs if f]
        chosen = sum(1 for _, _, c, _ in search_runs if c == p)
        curve = f"{statistics.median(fitted):.2f}" if fitted else "—"
        print(f"| {p} | {common.fmt(statistics.median(rate))} | {common.fmt(min(rate))}–"
              f"{common.fmt(max(rate))} | {1000 * a.batch / statistics.median(rate):.2f} | "
              f"{statistics.median(steps):.2f} | {min(steps):.2f}–{max(steps):.2f} | {curve} | "
              f"{chosen} of {len(search_runs)} |")
    seconds = [s for _, _, _, s in search_runs]
    print(f"\nThe search took {statistics.median(seconds):.1f} s (median; "
          f"{min(seconds):.1f}–{max(seconds):.1f}), job start-up not included.\n")
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--prism", default=os.path.join(ROOT, "build", "tools", "prism"))
    p.add_argument("--cluster", default="local:2,ps=4")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--counts", default="1,2,4", help="partition counts (default 1,2,4)")
    p.add_argument("--steps", type=int, default=2500, help="fixed runs' steps (default 2500)")
    p.add_argument("--search-steps", type=int, default=20, help="timed steps per count (20)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each (default 3)")
    p.add_argument("--warmup", type=int, default=5, help="steps left out of samples/s")
    p.add_argument("--timeout", type=int, default=600, help="seconds per command")
    a = p.parse_args()
    common.begin(a, "bench/partition_search/run.py")
    counts = sorted(int(c) for c in a.counts.split(","))
    try:
        with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
            search_runs = search(a, tmp, counts)
            fixed_runs = fixed(a, tmp, counts)
            report(a, counts, fixed_runs, search_runs)
    except common.Failed as e:
        sys.exit(f"run.py: a command failed: {e}")


if __name__ == "__main__":
    main()
