#!/usr/bin/python3
"""All-reduce effective bandwidth: Prism's gradient buckets during data-parallel training against
a raw Gloo ring all-reduce of the same byte counts between two processes, in one run. Prints
markdown tables for BENCHMARKS.md (commands and progress on stderr).

  Prism: bench/models/mlp1024.prism (784-1024-1024-10, Adam) on 2 workers, --strategy allreduce,
    --bucket-mb 4 (buckets of 45,096 B, 4,194,304 B and 3,215,360 B), global batch 128, 1 thread
    per worker, `prism run --trace DIR`. A bucket's span (track "all-reduce") runs on a worker's
    communication thread from taking the bucket (its staging into the flat buffer included) to
    its result written back into the gradients. A ring all-reduce cannot finish before the last
    rank enters it, so a bucket's time in a step is max(end) - max(start) over the two workers'
    spans (their clocks are the coordinator's): the earlier worker's wait for the later one is
    left out, as the raw figure leaves it out with a barrier. Effective bandwidth = bucket bytes / that time;
    median over the steps after --warmup of each run.
  Raw Gloo: `prism bench-allreduce` (runtime/dist/AllReduceTiming.h, the loop `prism calibrate`
    times with): two processes, the same sizes, each all-reduce after a barrier, --seconds per
    size; bytes / the slower rank's median time.
  Prism's staging: worker:0's span less its time inside the ring (the span's `collective_us`):
    gathering into and copying out of the flat buffer (the weighted ring weights the values as
    it reduces them).
  --before PATH: the same runs with another prism binary (an earlier build), for a before/after.
  Each pair alternates --repeat times; the tables give the median of the runs' figures and their
    spread (min–max).
  Networks: loopback (127.0.0.1), and (root only, for `ip netns`) two network namespaces joined
    by 1gbit tbf links (tests/netns/hosts.sh), one worker or rank in each.
  --model embedding: models/embedding_classifier.prism instead (global batch 64, --bucket-mb 25,
    zipf data over its 100,000-row table): one bucket of 26,038,440 B, the table's dense gradient
    (reduced where it lies) and the rest (gathered), in one call.

Usage: bench/allreduce_bandwidth/run.py [--prism build/tools/prism] [--before PRISM]
                                        [--repeat R] [--seconds S] [--skip-netns]
                                        [--skip-loopback] [--model mlp1024|embedding]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "distributed"))
import run as common  # noqa: E402  (bench/distributed/run.py: commands, hosts, formatting)

# --model: (file, global batch, --bucket-mb, --data)
MODELS = {"mlp1024": (os.path.join(ROOT, "bench", "models", "mlp1024.prism"), 128, "4",
                      "fashion-mnist"),
          "embedding": (os.path.join(ROOT, "models", "embedding_classifier.prism"), 64, "25",
                        "zipf:100000,tokens=20,classes=10")}
MODEL, BATCH, BUCKET_MB, DATA = MODELS["mlp1024"]


def bucket_times(trace_dir, warmup):
    """{(bucket name, bytes): ([seconds per step], [staging seconds per step])}: max(end) -
    max(start) over the workers' spans of each step's bucket (the k-th span of a bucket on each
    worker is step k's), and worker:0's span less its time in Gloo (`collective_us`)."""
    spans = []  # per worker: {name: [(start us, end us, bytes, us in Gloo)]}
    for w in (0, 1):
        by_name = defaultdict(list)
        trace = json.load(open(os.path.join(trace_dir, f"worker-{w}.json")))
        for e in trace["traceEvents"]:
            if e.get("ph") == "X" and e.get("cat") == "all_reduce" and e["name"] != "loss":
                args = e["args"]
                by_name[e["name"]].append((e["ts"], e["ts"] + e["dur"], args["bytes"],
                                           args.get("collective_us", e["dur"])))
        spans.append(by_name)
    times = {}
    for name, mine in spans[0].items():
        theirs = spans[1][name]
        if len(mine) != len(theirs):
            raise common.Failed(f"{trace_dir}: {len(mine)} spans of {name} on worker:0, "
                                f"{len(theirs)} on worker:1")
        steps = list(zip(mine, theirs))[warmup:]
        times[(name, int(mine[0][2]))] = (
            [(max(a[1], b[1]) - max(a[0], b[0])) / 1e6 for a, b in steps],
            [(a[1] - a[0] - a[3]) / 1e6 for a, _ in steps])
    return times


def prism_run(a, prism, plan, steps, trace_dir, prefix, launcher):
    """Per bucket: (bytes / median time over the steps of one traced run (bytes/s), median
    staging seconds)."""
    cmd = prefix + [prism, "run", plan, "--data", DATA, "--steps", str(steps), "--threads", "1",
           "--no-eval", "--quiet", "--trace", trace_dir]
    if launcher:
        cmd += ["--launcher", launcher]
    common.run(cmd, timeout=a.timeout)
    return {key: (key[1] / statistics.median(t), statistics.median(staging))
            for key, (t, staging) in bucket_times(trace_dir, a.warmup).items()}


def raw_run(a, sizes, addrs, prefixes):
    """Per size: bytes / the slower rank's median time of `prism bench-allreduce` between two
    processes (the result is usable on both only then, as Prism's max(end))."""
    port = free_port() if addrs[0] == "127.0.0.1" else 29500
    coordinator = f"{addrs[0]}:{port}"
    base = ["bench-allreduce", "--coordinator", coordinator, "--bytes",
            ",".join(str(s) for s in sizes), "--seconds", str(a.seconds)]
    peer_cmd = prefixes[1] + [a.prism] + base + ["--rank", "1", "--bind", addrs[1]]
    common.log(f"+ {' '.join(peer_cmd)} &")
    peer = subprocess.Popen(peer_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=common.ENV, start_new_session=True)
    try:
        out = common.run(prefixes[0] + [a.prism] + base + ["--rank", "0", "--bind", addrs[0]],
                         timeout=a.timeout)
        peer_out, err = peer.communicate(timeout=60)
        if peer.returncode != 0:
            raise common.Failed(f"exit {peer.returncode}: {' '.join(peer_cmd)}\n{err[-2000:]}")
    finally:
        if peer.poll() is None:
            os.killpg(peer.pid, 9)
            peer.wait()
    slowest = {}
    for line in (out + peer_out).splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            slowest[r["bytes"]] = max(slowest.get(r["bytes"], 0), r["median_s"])
    return {size: size / t for size, t in slowest.items()}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(a, tmp, label, cluster, steps, addrs, prefixes=([], []), launcher=None):
    """Alternating Prism (and --before) and raw runs; returns (label, steps, {(name, bytes):
    {"prism": [bytes/s], "staging": [s], "before": [bytes/s], "raw": [bytes/s]}})."""
    plan = os.path.join(tmp, f"{label.split()[0]}.pb")
    common.run([a.prism, "partition", MODEL, "--cluster", cluster, "--strategy", "allreduce",
                "--batch", str(BATCH), "--bucket-mb", BUCKET_MB, "--data", DATA, "-o", plan],
               timeout=300)
    results = defaultdict(lambda: defaultdict(list))
    for i in range(a.repeat):
        prism = prism_run(a, a.prism, plan, steps, os.path.join(tmp, f"trace-{label.split()[0]}-{i}"),
                          prefixes[0], launcher)
        before = {}
        if a.before:
            before = prism_run(a, a.before, plan, steps,
                               os.path.join(tmp, f"trace-{label.split()[0]}-{i}-before"), prefixes[0],
                               launcher)
        raw = raw_run(a, sorted({b for _, b in prism}), addrs, prefixes)
        for key, (rate, staging) in prism.items():
            results[key]["prism"].append(rate)
            results[key]["staging"].append(staging)
            results[key]["raw"].append(raw[key[1]])
            if key in before:
                results[key]["before"].append(before[key][0])
    return label, steps, results


def table(a, label, steps, results):
    print(f"### {label}: {a.model}, 2 workers, global batch {BATCH}, --bucket-mb {BUCKET_MB}, "
          f"{steps} steps per run, {a.repeat} alternating runs each\n")
    before = " | `--before` MB/s | before / raw" if a.before else ""
    print(f"| bucket | bytes | Prism MB/s | raw Gloo MB/s | Prism / raw (medians) | "
          f"Prism staging (µs, worker:0){before} |")
    print("| --- | ---: | --- | --- | ---: | ---: |" + (" --- | ---: |" if a.before else ""))
    spread = lambda r: f"{common.fmt(min(r) / 1e6)}–{common.fmt(max(r) / 1e6)}"
    for (name, size), r in sorted(results.items(), key=lambda kv: kv[0][0]):
        p, raw = statistics.median(r["prism"]), statistics.median(r["raw"])
        row = (f"| {name} | {size:,} | {common.fmt(p / 1e6)} ({spread(r['prism'])}) | "
               f"{common.fmt(raw / 1e6)} ({spread(r['raw'])}) | {100 * p / raw:.0f}% | "
               f"{common.fmt(statistics.median(r['staging']) * 1e6)} |")
        if a.before:
            b = statistics.median(r["before"])
            row += f" {common.fmt(b / 1e6)} ({spread(r['before'])}) | {100 * b / raw:.0f}% |"
        print(row)
    print()
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--prism", default=os.path.join(ROOT, "build", "tools", "prism"))
    p.add_argument("--before", help="another prism binary whose buckets are measured too, "
                   "alternating with --prism (an earlier build)")
    p.add_argument("--repeat", type=int, default=3, help="alternating runs of each side")
    p.add_argument("--seconds", type=float, default=10, help="raw Gloo's window per size")
    p.add_argument("--steps", type=int, default=250, help="Prism's steps on loopback")
    p.add_argument("--netns-steps", type=int, default=100, help="Prism's steps over 1gbit")
    p.add_argument("--warmup", type=int, default=10, help="steps left out of each run")
    p.add_argument("--skip-netns", action="store_true", help="loopback only (no root needed)")
    p.add_argument("--skip-loopback", action="store_true", help="1gbit namespaces only")
    p.add_argument("--netns-prefix", default=os.environ.get("PRISM_NETNS_PREFIX", "prism-arbw-"))
    p.add_argument("--timeout", type=int, default=900, help="seconds per command")
    p.add_argument("--model", choices=sorted(MODELS), default="mlp1024",
                   help="whose buckets (default mlp1024)")
    a = p.parse_args()
    global MODEL, BATCH, BUCKET_MB, DATA
    MODEL, BATCH, BUCKET_MB, DATA = MODELS[a.model]
    common.begin(a, "bench/allreduce_bandwidth/run.py")
    if a.before:
        a.before = os.path.abspath(a.before)
    try:
        with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
            if not a.skip_loopback:
                table(a, *measure(a, tmp, "Loopback", "local:2", a.steps,
                                  ["127.0.0.1", "127.0.0.1"]))
            if a.skip_netns:
                return
            if os.geteuid() != 0:
                print("### 1gbit namespaces: skipped (needs root for ip netns)\n")
                return
            with common.Hosts(2, "1gbit", a.netns_prefix) as hosts:
                cluster = os.path.join(tmp, "cluster.yaml")
                common.cluster_yaml(hosts, set(), cluster)
                prefixes = [["ip", "netns", "exec", hosts.ns(i)] for i in (0, 1)]
                table(a, *measure(a, tmp, "1gbit namespaces", cluster, a.netns_steps,
                                  [hosts.addr(0), hosts.addr(1)], prefixes,
                                  launcher=f"ip netns exec {hosts.prefix}{{host}}"))
    except common.Failed as e:
        sys.exit(f"run.py: a command failed: {e}")


if __name__ == "__main__":
    main()
