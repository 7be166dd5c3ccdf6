#!/usr/bin/python3
"""Local aggregation per host (--local-aggregation): the embedding classifier (hybrid) on 4 hosts
(network namespaces from tests/netns/hosts.sh, root only) over 1 Gbit links, 2 workers (1 thread
each) and a parameter server per host, with and without local aggregation, in one run. Prints a
markdown table for BENCHMARKS.md (commands and progress on stderr).

For each mode: samples/s of --repeat timed runs (each a window of at least --min-seconds
seconds after --warmup steps; the modes alternate, so drift of the machine's load falls on
both), median and spread; and the bytes that left and entered each host per step (its veth's
tx_bytes + rx_bytes: a long run minus a short one over their step difference, so start-up
traffic cancels out), the mean over the hosts, next to the plan's estimate.

Usage: bench/local_aggregation/run.py [--prism build/tools/prism] [--steps N] [--repeat R]
                                      [--batch B] [--rate 1gbit]
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
sys.path.insert(0, os.path.join(ROOT, "bench", "distributed"))
import run as common  # noqa: E402  (bench/distributed/run.py: commands, hosts, formatting)

HOSTS, DATA = 4, "zipf:100000,tokens=20,classes=10"
MODES = ("off", "on")


def host_bytes(hosts):
    """Per host: its veth's tx_bytes + rx_bytes so far."""
    result = []
    for i in range(hosts.n):
        total = 0
        for side in ("tx_bytes", "rx_bytes"):
            out = subprocess.run(["ip", "netns", "exec", hosts.ns(i), "cat",
                                  f"/sys/class/net/veth0/statistics/{side}"],
                                 capture_output=True, text=True, timeout=20)
            if out.returncode != 0:
                raise common.Failed(f"cannot read {side} of veth0 in {hosts.ns(i)}: {out.stderr}")
            total += int(out.stdout)
        result.append(total)
    return result


def cluster_yaml(hosts, path):
    with open(path, "w") as f:
        f.write("hosts:\n")
        for i in range(hosts.n):
            f.write(f"  - name: h{i}\n    address: {hosts.addr(i)}\n"
                    "    devices: [cpu:0, cpu:1]\n    ps: 1\n")
        f.write(f"network: {{ bandwidth: {hosts.rate} }}\n")


def estimated_host_bytes(a, plan):
    """The estimate's bytes out + in per host per step, the mean over the hosts."""
    d = json.loads(common.run([a.prism, "dump", plan, "--format", "json"], timeout=120))
    links = d["estimate"]["links"]
    return statistics.mean(l["bytes_out_per_step"] + l["bytes_in_per_step"] for l in links)


def timed_run(a, plan, metrics, in_h0, launcher):
    """samples/s after the warm-up, and the seconds the window took."""
    start = time.monotonic()
    rate = common.prism_run(a, plan, DATA, a.steps, a.batch, metrics, in_h0, launcher)
    return rate, (a.steps - a.warmup) * a.batch / rate, time.monotonic() - start


def bench(a, tmp):
    if os.geteuid() != 0:
        sys.exit("run.py: network namespaces need root")
    short = max(a.warmup + 1, a.steps // 4)
    with common.Hosts(HOSTS, a.rate, a.netns_prefix) as hosts:
        cluster = os.path.join(tmp, "cluster.yaml")
        cluster_yaml(hosts, cluster)
        launcher = f"ip netns exec {hosts.prefix}{{host}}"
        in_h0 = ["ip", "netns", "exec", hosts.ns(0)]
        model = os.path.join(ROOT, "models", "embedding_classifier.prism")
        plans, results = {}, {m: {"rates": [], "windows": [], "bytes": []} for m in MODES}
        for mode in MODES:
            plans[mode] = os.path.join(tmp, f"{mode}.pb")
            common.run([a.prism, "partition", model, "--cluster", cluster, "--strategy", "hybrid",
                        "--batch", str(a.batch), "--data", DATA, "--local-aggregation", mode,
                        "-o", plans[mode]], timeout=300)
            results[mode]["estimate"] = estimated_host_bytes(a, plans[mode])
        for r in range(a.repeat):
            for mode in MODES:
                common.log(f"== {mode}, run {r + 1} of {a.repeat}")
                metrics = plans[mode] + ".jsonl"
                b0 = host_bytes(hosts)
                rate, window, _ = timed_run(a, plans[mode], metrics, in_h0, launcher)
                b1 = host_bytes(hosts)
                common.prism_run(a, plans[mode], DATA, short, a.batch, metrics + ".short", in_h0,
                                 launcher)
                b2 = host_bytes(hosts)
                per_host = [((b1[i] - b0[i]) - (b2[i] - b1[i])) / (a.steps - short)
                            for i in range(hosts.n)]
                results[mode]["rates"].append(rate)
                results[mode]["windows"].append(window)
                results[mode]["bytes"].append(statistics.mean(per_host))
    return results


def report(a, results):
    print(f"### embedding_classifier (hybrid) on {HOSTS} hosts over {a.rate} links, 2 workers "
          f"(1 thread each) and a PS per host; global batch {a.batch}, {DATA}; {a.steps} steps "
          f"per run, first {a.warmup} left out, {a.repeat} runs per mode\n")
    print("| local aggregation | samples/s (median) | spread | vs off | window (s, min) | "
          "bytes per host per step (median) | spread | plan estimate |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    base = statistics.median(results["off"]["rates"])
    for mode in MODES:
        r = results[mode]
        med = statistics.median(r["rates"])
        print(f"| {mode} | {common.fmt(med)} | {common.fmt(min(r['rates']))}–"
              f"{common.fmt(max(r['rates']))} | {common.ratio(med, base)} | "
              f"{min(r['windows']):.1f} | {common.mb(statistics.median(r['bytes']))} | "
              f"{common.mb(min(r['bytes']))}–{common.mb(max(r['bytes']))} | "
              f"{common.mb(r['estimate'])} |")
    print()
    if min(min(results[m]["windows"]) for m in MODES) < a.min_seconds:
        print(f"(A window was shorter than {a.min_seconds} s: run with more --steps.)\n")
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--prism", default=os.path.join(ROOT, "build", "tools", "prism"))
    p.add_argument("--steps", type=int, default=400, help="timed run's steps (default 400)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per mode (default 3)")
    p.add_argument("--warmup", type=int, default=5, help="steps left out of samples/s")
    p.add_argument("--batch", type=int, default=512, help="global batch (default 512)")
    p.add_argument("--rate", default="1gbit", help="link rate (tc tbf)")
    p.add_argument("--min-seconds", type=float, default=10, help="shortest window to accept")
    p.add_argument("--netns-prefix", default=os.environ.get("PRISM_NETNS_PREFIX", "prism-bla-"))
    p.add_argument("--timeout", type=int, default=1200, help="seconds per command")
    a = p.parse_args()
    common.begin(a, "bench/local_aggregation/run.py")
    try:
        with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
            report(a, bench(a, tmp))
    except common.Failed as e:
        sys.exit(f"run.py: a command failed: {e}")


if __name__ == "__main__":
    main()
