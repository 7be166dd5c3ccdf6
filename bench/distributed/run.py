#!/usr/bin/python3
"""Data-parallel benchmarks: Prism (`prism partition` + `prism run`) against PyTorch DDP (gloo,
bench/distributed/ddp_peer.py) on the same models, data, batch and machine, in one run. Prints
markdown tables ready for BENCHMARKS.md (progress and commands go to stderr).

  (a) loopback: cnn (global batch 128, fashion-mnist) on `local:2` (2 workers x 1 thread) against
      DDP with 2 ranks; Prism on `local:1` and DDP with 1 rank for scaling; ratios.
  (b) namespaces (root only): 4 hosts (network namespaces from tests/netns/hosts.sh) on 1gbit
      tbf links, one worker each, parameter servers on --ps-hosts; embedding_classifier
      (global batch 64, zipf:100000) with --strategy hybrid and --strategy allreduce against DDP
      with sparse and dense embedding gradients; the same with a 1,000,000-row table.
  (c) bytes on the wire per step for each run of (b), next to the plan's estimate.

How figures are taken:
  Prism samples/s: from `prism run --metrics-out` JSON lines, the steps after the first
    --warmup: (steps x global batch) / sum of the steps' times (each step's time is
    global batch / its samples_per_sec); the `done:` line when there are no metrics.
  DDP samples/s: ddp_peer.py's own figure (timed steps between barriers, slowest rank).
  Wire bytes: the sum over the hosts' namespaces of their veth's tx_bytes (every byte that leaves
    a host crosses one link; bytes between tasks of one host stay on its loopback). For Prism,
    two runs of one plan differ only in their step counts, so (bytes(long) - bytes(short)) /
    (steps(long) - steps(short)) removes start-up (launch, rendezvous, first pulls, shutdown).
    DDP's figure is counted by the ranks around their timed steps. Both include TCP/IP headers
    and ACKs (with GSO on veth, about 0.1% on bulk transfers).
  Plan estimate: `prism dump plan.pb --format json`: estimate.links[].bytes_out_per_step summed
    over hosts (what should cross links: comparable to the measured figure), and
    sum(estimate.bytes_per_step) / 2 over all tasks (every byte is sent by one task and received
    by another, so counted twice; this includes traffic between tasks on one host).

Both sides run with OPENBLAS_NUM_THREADS=1, OMP_WAIT_POLICY=passive and (unless --stock-malloc)
MALLOC_ENV below.

Usage: bench/distributed/run.py [--prism build/tools/prism] [--steps N] [--quick]
                                [--skip-netns] [--skip-loopback] [--skip-1m] [--no-prism]
                                [--stock-malloc]
"""
import argparse
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PEER = os.path.join(HERE, "ddp_peer.py")
HOSTS_SH = os.path.join(ROOT, "tests", "netns", "hosts.sh")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
# The same glibc malloc settings for Prism and the peer (see MALLOC_ENV in ddp_peer.py: freed
# large blocks stay in the heap instead of being page-faulted in again at every step);
# --stock-malloc leaves glibc's defaults on both sides.
MALLOC_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 36)}


STOCK_MALLOC = False


class Failed(Exception):
    pass


def begin(a, script):
    """What every benchmark script does first: glibc malloc kept from returning memory (as in
    `prism`'s own runs), the prism binary checked, SIGTERM/SIGHUP turned into exits (so temporary
    directories go), and the command line with the machine's load printed."""
    ENV.update(MALLOC_ENV)
    a.prism = os.path.abspath(a.prism)
    if not os.access(a.prism, os.X_OK):
        sys.exit(f"run.py: no prism binary at {a.prism} (--prism PATH)")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    print(f"Command: `{shlex.join([script] + sys.argv[1:])}` "
          f"({os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start, "
          f"{time.strftime('%Y-%m-%d')})\n")


def log(msg):
    print(msg, file=sys.stderr)
    sys.stderr.flush()


def run(cmd, timeout, env=None):
    """Runs cmd; returns its stdout. A failure or a timeout raises Failed naming the command."""
    line = shlex.join(cmd)
    log(f"+ {line}")
    # Its own session, so that on a timeout the whole group it started (ours) can be ended.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env or ENV, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = p.communicate(timeout=30)
        raise Failed(f"timed out after {timeout} s: {line}\n{(err or '')[-2000:]}")
    except BaseException:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        raise
    if p.returncode != 0:
        raise Failed(f"exit {p.returncode}: {line}\n{err[-3000:]}")
    return out


# ---------------------------------------------------------------------------------------------
# Prism

def partition(a, model, cluster, strategy, batch, data, plan):
    run([a.prism, "partition", model, "--cluster", cluster, "--strategy", strategy, "--batch",
         str(batch), "--data", data, "-o", plan], timeout=300)


def estimate(a, plan):
    """(bytes between hosts per step, sum over tasks / 2) from the plan's estimate."""
    d = json.loads(run([a.prism, "dump", plan, "--format", "json"], timeout=120))
    est = d.get("estimate", {})
    links = sum(l.get("bytes_out_per_step", 0) for l in est.get("links", []))
    tasks = sum(est.get("bytes_per_step", {}).values()) / 2
    return links, tasks


def prism_run(a, plan, data, steps, batch, metrics, prefix=(), launcher=None):
    """`prism run`; returns samples/s after the warm-up steps."""
    cmd = list(prefix) + [a.prism, "run", plan, "--data", data, "--steps", str(steps),
                          "--threads", "1", "--no-eval", "--metrics-out", metrics, "--quiet"]
    if launcher:
        cmd += ["--launcher", launcher]
    if os.path.exists(metrics):
        os.remove(metrics)
    out = run(cmd, timeout=a.timeout)
    rows = []
    if os.path.exists(metrics):
        with open(metrics) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    r = json.loads(line)
                    if "step" in r and r.get("samples_per_sec"):
                        rows.append(r)
    steady = rows[a.warmup:] if len(rows) > a.warmup else rows
    if steady:
        seconds = sum(batch / r["samples_per_sec"] for r in steady)
        return len(steady) * batch / seconds
    done = [l for l in out.splitlines() if l.startswith("done:")]
    if done:  # done: N steps, S samples/s, loss L
        for part in done[-1].split(","):
            if "samples/s" in part:
                return float(part.split()[0])
    raise Failed(f"no samples/s in {metrics} nor a 'done:' line from: {shlex.join(cmd)}")


def ddp(model, world, steps, extra=(), timeout=900):
    cmd = [PY, PEER, model, "--world", str(world), "--steps", str(steps), "--timeout",
           str(timeout)] + list(extra)
    if STOCK_MALLOC:
        cmd.append("--stock-malloc")
    out = run(cmd, timeout=timeout + 60)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if not lines:
        raise Failed(f"no result line from: {shlex.join(cmd)}")
    return json.loads(lines[-1])


def fmt(x, digits=0):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:,.{digits}f}"


def ratio(x, y):
    return f"{x / y:.2f}x" if x and y else "—"


def mb(x):
    return "—" if x is None else f"{x / 1e6:,.3f} MB"


# ---------------------------------------------------------------------------------------------
# (a) loopback

def loopback(a, tmp):
    log("== (a) loopback: cnn, global batch 128")
    G, data = 128, "fashion-mnist"
    model = os.path.join(ROOT, "models", "cnn.prism")
    prism = {}
    if not a.no_prism:
        for n in (2, 1):
            plan = os.path.join(tmp, f"cnn-local{n}.pb")
            partition(a, model, f"local:{n}", "allreduce", G, data, plan)
            prism[n] = prism_run(a, plan, data, a.steps, G, os.path.join(tmp, f"cnn{n}.jsonl"))
    torch = {n: ddp("cnn", n, a.steps, ["--warmup", str(a.warmup)])["samples_per_sec"]
             for n in (2, 1)}
    print("### Loopback: cnn (global batch 128, fashion-mnist), 1 thread per worker\n")
    print("| workers | Prism samples/s | DDP samples/s | Prism / DDP |")
    print("| --- | --- | --- | --- |")
    for n in (2, 1):
        print(f"| {n} | {fmt(prism.get(n))} | {fmt(torch[n])} | {ratio(prism.get(n), torch[n])} |")
    print(f"\nScaling 1 → 2 workers: Prism {ratio(prism.get(2), prism.get(1))}, "
          f"DDP {ratio(torch[2], torch[1])}.\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# (b), (c) namespaces

class Hosts:
    """tests/netns/hosts.sh up/down, always brought down."""

    def __init__(self, n, rate, prefix, burst=None):
        self.n, self.rate = n, rate
        self.env = dict(ENV, PRISM_NETNS_PREFIX=prefix)
        if burst:  # tc tbf's bucket (hosts.sh's default otherwise)
            self.env["PRISM_NETNS_BURST"] = burst
        self.prefix = prefix
        self.up = False

    def __enter__(self):
        self.up = True
        p = subprocess.run(["bash", HOSTS_SH, "up", str(self.n), self.rate], env=self.env,
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            self.__exit__()
            raise Failed(f"exit {p.returncode}: {HOSTS_SH} up {self.n} {self.rate}\n{p.stderr}")
        return self

    def __exit__(self, *exc):
        if self.up:
            subprocess.run(["bash", HOSTS_SH, "down"], env=self.env, timeout=120)
            self.up = False

    def ns(self, i):
        return f"{self.prefix}h{i}"

    def addr(self, i):
        return f"{a_subnet()}.{i + 1}"

    def tx_bytes(self):
        total = 0
        for i in range(self.n):
            out = subprocess.run(["ip", "netns", "exec", self.ns(i), "cat",
                                  "/sys/class/net/veth0/statistics/tx_bytes"],
                                 capture_output=True, text=True, timeout=20)
            if out.returncode != 0:
                raise Failed(f"cannot read tx_bytes of veth0 in {self.ns(i)}: {out.stderr}")
            total += int(out.stdout)
        return total


def a_subnet():
    return os.environ.get("PRISM_NETNS_SUBNET", "10.77.0")


def cluster_yaml(hosts, ps_hosts, path, machine=None):
    """The namespaces as hosts; `machine` names the one machine they all run on."""
    with open(path, "w") as f:
        f.write("hosts:\n")
        for i in range(hosts.n):
            f.write(f"  - name: h{i}\n    address: {hosts.addr(i)}\n    devices: [cpu:0]\n")
            if machine:
                f.write(f"    machine: {machine}\n")
            if i in ps_hosts:
                f.write("    ps: 1\n")
        f.write(f"network: {{ bandwidth: {hosts.rate} }}\n")


def netns(a, tmp):
    if os.geteuid() != 0:
        print("### Namespaces: skipped (needs root for ip netns)\n")
        return
    n, rate, G = 4, "1gbit", 64
    short = max(a.warmup + 1, a.steps // 4)
    ps_hosts = {int(x) for x in a.ps_hosts.split(",") if x != ""}
    base = open(os.path.join(ROOT, "models", "embedding_classifier.prism")).read()
    variants = [("100k rows", 100000, os.path.join(ROOT, "models", "embedding_classifier.prism"))]
    if not a.skip_1m:
        m1 = os.path.join(tmp, "embedding_classifier_1m.prism")
        with open(m1, "w") as f:
            f.write(base.replace("100000", "1000000"))
        variants.append(("1M rows", 1000000, m1))
    results = []  # (variant, system, samples/s, wire bytes/step, est links, est tasks/2)
    with Hosts(n, rate, a.netns_prefix) as hosts:
        log(f"== (b) namespaces: {n} hosts on {rate} links ({hosts.prefix}h0..)")
        cluster = os.path.join(tmp, "cluster.yaml")
        cluster_yaml(hosts, ps_hosts, cluster)
        launcher = f"ip netns exec {hosts.prefix}{{host}}"
        in_h0 = ["ip", "netns", "exec", hosts.ns(0)]
        addrs = ",".join(hosts.addr(i) for i in range(n))
        for label, rows, model in variants:
            data = f"zipf:{rows},tokens=20,classes=10"
            if not a.no_prism:
                for strategy in ("hybrid", "allreduce"):
                    plan = os.path.join(tmp, f"emb-{rows}-{strategy}.pb")
                    partition(a, model, cluster, strategy, G, data, plan)
                    est_links, est_tasks = estimate(a, plan)
                    metrics = os.path.join(tmp, f"emb-{rows}-{strategy}.jsonl")
                    b0 = hosts.tx_bytes()
                    rate_ = prism_run(a, plan, data, a.steps, G, metrics, in_h0, launcher)
                    b1 = hosts.tx_bytes()
                    prism_run(a, plan, data, short, G, metrics + ".short", in_h0, launcher)
                    b2 = hosts.tx_bytes()
                    wire = ((b1 - b0) - (b2 - b1)) / (a.steps - short)
                    results.append((label, f"Prism {strategy}", rate_, wire, est_links, est_tasks))
            for sparse in (True, False):
                steps = a.steps if sparse else a.dense_steps
                extra = ["--global-batch", str(G), "--rows", str(rows), "--addresses", addrs,
                         "--launcher", launcher, "--count-bytes", "--warmup",
                         str(min(a.warmup, 2) if not sparse else a.warmup)]
                r = ddp("embedding", n, steps, extra + (["--sparse"] if sparse else []),
                        timeout=a.timeout)
                results.append((label, f"DDP {'sparse' if sparse else 'dense'} ({r['optimizer']})",
                                r["samples_per_sec"], r.get("wire_bytes_per_step"), None, None))
            sys.stdout.flush()

    psn = ", ".join(f"h{i}" for i in sorted(ps_hosts)) or "none"
    print(f"### Namespaces: embedding_classifier, {n} hosts on {rate} links, one worker "
          f"(1 thread) per host, parameter servers on {psn}; global batch {G}\n")
    print("| table | system | samples/s | vs Prism hybrid |")
    print("| --- | --- | --- | --- |")
    for label, system, sps, *_ in results:
        hyb = next((r[2] for r in results if r[0] == label and r[1] == "Prism hybrid"), None)
        print(f"| {label} | {system} | {fmt(sps)} | {ratio(hyb, sps) if system != 'Prism hybrid' else '1.00x'} |")
    print("\n(\"vs Prism hybrid\" is Prism hybrid's samples/s over the row's.)\n")
    print("### Bytes on the wire per step (sum over the 4 hosts of what left each host)\n")
    print("| table | system | measured | plan estimate, between hosts | measured / estimate "
          "| plan estimate, all tasks (Σ/2) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, system, _, wire, est_links, est_tasks in results:
        print(f"| {label} | {system} | {mb(wire)} | {mb(est_links)} | "
              f"{ratio(wire, est_links)} | {mb(est_tasks)} |")
    print()
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--prism", default=os.path.join(ROOT, "build", "tools", "prism"))
    p.add_argument("--steps", type=int, default=60, help="timed run's steps (default 60)")
    p.add_argument("--dense-steps", type=int, default=0,
                   help="DDP dense steps over the namespaces (default steps / 3, at least 5)")
    p.add_argument("--warmup", type=int, default=5, help="steps left out of samples/s")
    p.add_argument("--quick", action="store_true", help="20 steps (dense DDP: 5), no 1M table")
    p.add_argument("--skip-netns", action="store_true", help="only the loopback table")
    p.add_argument("--skip-loopback", action="store_true", help="only the namespace tables")
    p.add_argument("--skip-1m", action="store_true", help="leave out the 1M-row table")
    p.add_argument("--no-prism", action="store_true", help="only the DDP figures")
    p.add_argument("--ps-hosts", default="0,1", help="hosts with a PS task (default 0,1)")
    p.add_argument("--netns-prefix", default=os.environ.get("PRISM_NETNS_PREFIX", "prism-bench-"))
    p.add_argument("--timeout", type=int, default=900, help="seconds per command")
    p.add_argument("--stock-malloc", action="store_true",
                   help="glibc malloc's defaults on both sides (default: MALLOC_ENV on both)")
    a = p.parse_args()
    global STOCK_MALLOC
    STOCK_MALLOC = a.stock_malloc
    if not a.stock_malloc:
        ENV.update(MALLOC_ENV)
    else:
        for k in MALLOC_ENV:
            ENV.pop(k, None)
    if a.quick:
        a.steps, a.skip_1m = min(a.steps, 20), True
        a.dense_steps = a.dense_steps or 5
    a.dense_steps = a.dense_steps or max(5, a.steps // 3)
    if a.steps <= a.warmup + 1:
        p.error("--steps must exceed --warmup + 1")
    a.prism = os.path.abspath(a.prism)
    if not a.no_prism and not os.access(a.prism, os.X_OK):
        sys.exit(f"run.py: no prism binary at {a.prism} (--prism PATH, or --no-prism)")

    # SIGTERM/SIGHUP end the run through the normal exit path, so the namespaces come down.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    print(f"Command: `{shlex.join(['bench/distributed/run.py'] + sys.argv[1:])}` "
          f"({os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start, "
          f"{'stock glibc malloc' if a.stock_malloc else 'MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2^36'}, "
          f"{time.strftime('%Y-%m-%d')})\n")
    try:
        with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
            if not a.skip_loopback:
                loopback(a, tmp)
            if not a.skip_netns:
                netns(a, tmp)
    except Failed as e:
        sys.exit(f"run.py: a command failed: {e}")


if __name__ == "__main__":
    main()
