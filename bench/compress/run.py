#!/usr/bin/python3
"""Compressed communication (--compress): what fp16 and bf16 gradients cost in accuracy and gain
in bytes and speed, against float32, in one run. Prints markdown tables for BENCHMARKS.md
(commands and progress on stderr).

  (a) accuracy: mlp and cnn, 2 workers on loopback (`local:2`, allreduce), global batch 128,
      Fashion-MNIST, one epoch per run; the test accuracy after the epoch for float32, fp16,
      fp16 with --error-feedback and bf16.
  (b) speed and bytes (root only): cnn on 2 hosts (network namespaces from tests/netns/hosts.sh)
      over 1 Gbit links (--rates), one worker (1 thread) each; samples/s of --steps steps after --warmup,
      --repeat times (median and spread), and the bytes that left the hosts per step (veth
      tx_bytes: a long run minus a short one over their step difference) next to the plan's
      estimate and the workers' own count (metrics `bytes_sent`).

Usage: bench/compress/run.py [--prism build/tools/prism] [--steps N] [--repeat R]
                             [--skip-accuracy] [--skip-netns] [--rates 1gbit,100mbit]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "distributed"))
import run as common  # noqa: E402  (bench/distributed/run.py: commands, hosts, formatting)

VARIANTS = [("float32", []), ("fp16", ["--compress", "fp16"]),
            ("fp16 + error feedback", ["--compress", "fp16", "--error-feedback"]),
            ("bf16", ["--compress", "bf16"])]


def partition(a, model, cluster, batch, extra, plan):
    common.run([a.prism, "partition", model, "--cluster", cluster, "--strategy", "allreduce",
                "--batch", str(batch), "-o", plan] + extra, timeout=300)


def metrics_of(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.startswith("{")]


def accuracy(a, tmp):
    common.log("== (a) accuracy after one epoch, 2 workers on loopback")
    rows = []
    for model in ("mlp", "cnn"):
        path = os.path.join(ROOT, "models", f"{model}.prism")
        for label, extra in VARIANTS:
            plan = os.path.join(tmp, f"{model}-{len(rows)}.pb")
            partition(a, path, "local:2", 128, extra, plan)
            metrics = plan + ".jsonl"
            common.run([a.prism, "run", plan, "--data", "fashion-mnist", "--epochs", "1",
                        "--threads", "1", "--quiet", "--metrics-out", metrics], timeout=a.timeout)
            lines = metrics_of(metrics)
            acc = [l["test_accuracy"] for l in lines if "test_accuracy" in l][-1]
            sent = statistics.median(l["bytes_sent"] for l in lines if "bytes_sent" in l)
            rows.append((model, label, acc, sent))
    print("### Accuracy after one epoch (2 workers, global batch 128, Fashion-MNIST test set)\n")
    print("| model | gradients on the wire | test accuracy | vs float32 | bytes sent per step "
          "(worker:0) |")
    print("| --- | --- | --- | --- | --- |")
    for model, label, acc, sent in rows:
        base = next(r[2] for r in rows if r[0] == model and r[1] == "float32")
        print(f"| {model} | {label} | {acc:.4f} | {100 * (acc - base):+.2f} points | "
              f"{common.mb(sent)} |")
    print()
    sys.stdout.flush()


def speed(a, tmp, rate):
    if os.geteuid() != 0:
        print("### Namespaces: skipped (needs root for ip netns)\n")
        return
    n, G = 2, 128
    data = "fashion-mnist"
    short = max(a.warmup + 1, a.steps // 4)
    model = os.path.join(ROOT, "models", "cnn.prism")
    results = []
    with common.Hosts(n, rate, a.netns_prefix) as hosts:
        common.log(f"== (b) cnn on {n} namespace hosts over {rate}")
        cluster = os.path.join(tmp, "cluster.yaml")
        common.cluster_yaml(hosts, set(), cluster)
        launcher = f"ip netns exec {hosts.prefix}{{host}}"
        in_h0 = ["ip", "netns", "exec", hosts.ns(0)]
        for label, extra in VARIANTS:
            plan = os.path.join(tmp, f"cnn-netns-{len(results)}.pb")
            partition(a, model, cluster, G, extra, plan)
            est_links, _ = common.estimate(a, plan)
            rates = []
            metrics = plan + ".jsonl"
            for _ in range(a.repeat):
                b0 = hosts.tx_bytes()
                rates.append(common.prism_run(a, plan, data, a.steps, G, metrics, in_h0, launcher))
                b1 = hosts.tx_bytes()
            counted = statistics.median(l["bytes_sent"] for l in metrics_of(metrics)
                                        if "bytes_sent" in l)
            common.prism_run(a, plan, data, short, G, metrics + ".short", in_h0, launcher)
            b2 = hosts.tx_bytes()
            wire = ((b1 - b0) - (b2 - b1)) / (a.steps - short)
            results.append((label, rates, wire, est_links, counted))
    print(f"### cnn on {n} hosts over {rate} links (one worker, 1 thread each; global batch {G}; "
          f"{a.steps} steps, first {a.warmup} left out, {a.repeat} runs)\n")
    print("| gradients on the wire | samples/s (median) | spread | vs float32 | bytes left the "
          "hosts per step | plan estimate | worker:0 counted |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    base = statistics.median(results[0][1])
    for label, rates, wire, est, counted in results:
        med = statistics.median(rates)
        print(f"| {label} | {common.fmt(med)} | {common.fmt(min(rates))}–{common.fmt(max(rates))} "
              f"| {common.ratio(med, base)} | {common.mb(wire)} | {common.mb(est)} | "
              f"{common.mb(2 * counted)} |")
    print("\n(\"worker:0 counted\" is twice worker:0's `bytes_sent`: both hosts send as much.)\n")
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--prism", default=os.path.join(ROOT, "build", "tools", "prism"))
    p.add_argument("--steps", type=int, default=200, help="timed run's steps (default 200)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per variant (default 3)")
    p.add_argument("--warmup", type=int, default=5, help="steps left out of samples/s")
    p.add_argument("--skip-accuracy", action="store_true")
    p.add_argument("--skip-netns", action="store_true")
    p.add_argument("--rates", default="1gbit", help="link rates to run (tc tbf), e.g. 1gbit,100mbit")
    p.add_argument("--netns-prefix", default=os.environ.get("PRISM_NETNS_PREFIX", "prism-bench-"))
    p.add_argument("--timeout", type=int, default=1200, help="seconds per command")
    a = p.parse_args()
    common.begin(a, "bench/compress/run.py")
    try:
        with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
            if not a.skip_accuracy:
                accuracy(a, tmp)
            if not a.skip_netns:
                for rate in a.rates.split(","):
                    speed(a, tmp, rate)
    except common.Failed as e:
        sys.exit(f"run.py: a command failed: {e}")


if __name__ == "__main__":
    main()
