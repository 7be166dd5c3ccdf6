#!/usr/bin/python3
"""Automatic choices against hand-picked plans: each model on 4 hosts (network namespaces from
tests/netns/hosts.sh, root only, a tbf bucket of --burst; the cluster file says they share one
machine) over 1 Gbit links, a worker (1 thread) and a parameter server per host, compiled with
every strategy x partitions {1, 2, 4} (bucket 25 MiB; a server holds one row range of a table,
so 4 servers take at most 4), with the default of before (hybrid, partitions by size, 25 MiB) and
with the automatic choices (`--strategy auto --partitions auto --bucket-mb auto`, the defaults),
then trained; plans that place every variable and bucket alike are run once. Also the search's
own cost: `prism partition` at 64 workers with `--partitions auto` against a fixed count. Prints
markdown tables for BENCHMARKS.md (commands and progress on stderr).

The automatic choices predict with --profile, or a profile this script measures first with
`prism calibrate -o P --cluster C --launcher 'ip netns exec PREFIX{host}'` (on this machine, a
ring through the namespaces' links measured too; --loopback-profile leaves that out, and the
links are then costed at the bandwidth the cluster file gives). Where the profile's links have a
latency after the ranks' work (`wake_latency`), each plan is also predicted with the profile
less it (the links' rings at their back-to-back latency), beside the same measurements.

Usage: bench/auto/run.py [--prism build/tools/prism] [--models embedding_classifier,mlp]
                         [--steps N] [--repeat R] [--batch B] [--rate 1gbit] [--burst 64kb]
                         [--profile P] [--loopback-profile]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "distributed"))
import run as common  # noqa: E402  (bench/distributed/run.py: commands, hosts, formatting)

HOSTS = 4
DATA = {"embedding_classifier": "zipf:100000,tokens=20,classes=10", "mlp": "fashion-mnist",
        "cnn": "fashion-mnist", "lstm_lm": "zipf:10000,tokens=35,classes=10000"}
FIXED = ["--bucket-mb", "25"]


def configs():
    """(label, flags) of every hand-picked plan, today's default and the automatic one."""
    result = [("auto", ["--strategy", "auto", "--partitions", "auto", "--bucket-mb", "auto"]),
              ("default of before (hybrid, by size)",
               ["--strategy", "hybrid", "--partitions", "0"] + FIXED),
              ("allreduce", ["--strategy", "allreduce", "--partitions", "1"] + FIXED)]
    for strategy in ("hybrid", "ps"):
        for p in (1, 2, 4, 8)[:HOSTS.bit_length()]:  # a server holds one range of a table
            result.append((f"{strategy}, {p} partitions",
                           ["--strategy", strategy, "--partitions", str(p)] + FIXED))
    return result


def placement_key(a, plan):
    """What makes two plans run alike: each variable's placement and shards, the buckets."""
    d = json.loads(common.run([a.prism, "dump", plan, "--format", "json"], timeout=120))
    variables = [(v["name"], v.get("placement"), json.dumps(v.get("shards", []), sort_keys=True))
                 for v in d["variables"]]
    buckets = [(b["id"], tuple(b["values"])) for b in d["buckets"]]
    return json.dumps([variables, buckets]), d.get("decisions", [])


def chosen_text(decisions):
    return "; ".join(f"{d['subject']}: {d['chosen']}" for d in decisions) or "—"


def back_to_back_profile(profile, tmp):
    """The profile with its links' rings costed at their back-to-back latency (as before their
    latency after the ranks' work was measured), or None when it has no such figure."""
    with open(profile) as f:
        p = json.load(f)
    links = p.get("links", [])
    if not any("wake_latency" in link for link in links):
        return None
    for link in links:
        link.pop("wake_latency", None)
    path = os.path.join(tmp, "profile-back-to-back.json")
    with open(path, "w") as f:
        json.dump(p, f)
    return path


def bench_model(a, name, cluster, profile, hosts, tmp):
    model = os.path.join(ROOT, "models", f"{name}.prism")
    data = DATA.get(name, "fashion-mnist")
    launcher = f"ip netns exec {hosts.prefix}{{host}}"
    in_h0 = ["ip", "netns", "exec", hosts.ns(0)]
    runs, alias, decisions = {}, {}, []
    back_to_back = back_to_back_profile(profile, tmp)
    for i, (label, flags) in enumerate(configs()):
        plan = os.path.join(tmp, f"{name}-{i}.pb")
        common.run([a.prism, "partition", model, "--cluster", cluster, "--batch", str(a.batch),
                    "--data", data, "--profile", profile, "-o", plan] + flags, timeout=300)
        key, made = placement_key(a, plan)
        if label == "auto":
            decisions = made
        first = next((l for l, r in runs.items() if r["key"] == key), None)
        if first:
            alias[label] = first
            continue
        predict = lambda p: json.loads(common.run(  # noqa: E731
            [a.prism, "simulate", plan, "--profile", p, "--json"], timeout=120))["step_seconds"]
        runs[label] = {"key": key, "plan": plan, "rates": [], "predicted": predict(profile)}
        if back_to_back:
            runs[label]["back_to_back"] = predict(back_to_back)
    for r in range(a.repeat):
        for label, entry in runs.items():
            common.log(f"== {name}: {label}, run {r + 1} of {a.repeat}")
            metrics = entry["plan"] + ".jsonl"
            entry["rates"].append(common.prism_run(a, entry["plan"], data, a.steps, a.batch,
                                                   metrics, in_h0, launcher))
    return runs, alias, decisions


def report_model(a, name, runs, alias, decisions):
    median = {label: statistics.median(r["rates"]) for label, r in runs.items()}
    rate = lambda label: median[alias.get(label, label)]  # noqa: E731
    hand = [l for l, _ in configs() if l not in ("auto", "default of before (hybrid, by size)")]
    best = max(hand, key=rate)
    print(f"### {name} on {HOSTS} hosts of one machine over {a.rate} links (tbf bucket "
          f"{a.burst}), a worker (1 thread) and a PS per host; global batch {a.batch}; "
          f"{a.steps} steps per run, first {a.warmup} left out, {a.repeat} runs per plan\n")
    print(f"Automatic choices: {chosen_text(decisions)}.\n")
    b2b = any("back_to_back" in r for r in runs.values())
    extra = (" predicted, rings back to back | its error |", " --- | --- |") if b2b else ("", "")
    print("| plan | samples/s (median) | spread | vs best hand-picked | step ms measured | "
          "predicted | simulator error |" + extra[0])
    print("| --- | --- | --- | --- | --- | --- | --- |" + extra[1])
    errors, b2b_errors = [], []
    for label, _ in configs():
        if label in alias:
            print(f"| {label} | as {alias[label]} | | {common.ratio(rate(label), rate(best))} "
                  "| | | |" + (" | |" if b2b else ""))
            continue
        rs = runs[label]["rates"]
        measured = a.batch / median[label]
        predicted = runs[label]["predicted"]
        errors.append(abs(predicted - measured) / measured)
        row = (f"| {label} | {common.fmt(median[label])} | {common.fmt(min(rs))}–"
               f"{common.fmt(max(rs))} | {common.ratio(median[label], rate(best))} | "
               f"{measured * 1e3:.2f} | {predicted * 1e3:.2f} | {errors[-1] * 100:.0f}% |")
        if b2b:
            other = runs[label]["back_to_back"]
            b2b_errors.append(abs(other - measured) / measured)
            row += f" {other * 1e3:.2f} | {b2b_errors[-1] * 100:.0f}% |"
        print(row)
    print(f"\nSimulator error (|predicted - measured| / measured of the step): median "
          f"{statistics.median(errors) * 100:.0f}%, range {min(errors) * 100:.0f}–"
          f"{max(errors) * 100:.0f}% over {len(errors)} plans.")
    if b2b_errors:
        print(f"With the links' rings at their back-to-back latency: median "
              f"{statistics.median(b2b_errors) * 100:.0f}%, range "
              f"{min(b2b_errors) * 100:.0f}–{max(b2b_errors) * 100:.0f}%.")
    print(f"\nBest hand-picked: {best}. Auto / best hand-picked: "
          f"{rate('auto') / rate(best):.3f}; auto / default of before: "
          f"{rate('auto') / rate('default of before (hybrid, by size)'):.3f}.\n")
    sys.stdout.flush()


def search_cost(a):
    """Seconds `--partitions auto` adds to `prism partition` at 64 workers (median of 5)."""
    print("### The search's own cost: `prism partition MODEL --cluster local:64,ps=4`\n")
    print("| model | fixed (s) | --partitions auto (s) | added (s) | all automatic (s) |")
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
        for name in ("embedding_classifier", "lstm_lm", "resnet", "mlp"):
            model = os.path.join(ROOT, "models", f"{name}.prism")
            base = [a.prism, "partition", model, "--cluster", "local:64,ps=4", "-o",
                    os.path.join(tmp, "p.pb")]
            times = {}
            for label, flags in (("fixed", ["--strategy", "hybrid", "--partitions", "0"] + FIXED),
                                 ("partitions", ["--strategy", "hybrid", "--partitions", "auto"]
                                  + FIXED),
                                 ("auto", [])):
                samples = []
                for _ in range(5):
                    start = time.monotonic()
                    common.run(base + flags, timeout=120)
                    samples.append(time.monotonic() - start)
                times[label] = statistics.median(samples)
            print(f"| {name} | {times['fixed']:.3f} | {times['partitions']:.3f} | "
                  f"{times['partitions'] - times['fixed']:.3f} | {times['auto']:.3f} |")
    print()
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--prism", default=os.path.join(ROOT, "build", "tools", "prism"))
    p.add_argument("--models", default="embedding_classifier,mlp")
    p.add_argument("--steps", type=int, default=300, help="timed run's steps (default 300)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per plan (default 3)")
    p.add_argument("--warmup", type=int, default=5, help="steps left out of samples/s")
    p.add_argument("--batch", type=int, default=256, help="global batch (default 256)")
    p.add_argument("--rate", default="1gbit", help="link rate (tc tbf)")
    p.add_argument("--burst", default="64kb",
                   help="tc tbf's bucket (default 64kb: 0.5 ms at 1 Gbit, as a real link's "
                        "queue lets a step's messages through at the rate; hosts.sh's 512kb "
                        "lets most of them through at the veth's speed)")
    p.add_argument("--profile", default="",
                   help="cost profile (default: measured first, with the hosts' links)")
    p.add_argument("--loopback-profile", action="store_true",
                   help="measure the profile without --cluster (the links at their bandwidth)")
    p.add_argument("--netns-prefix", default=os.environ.get("PRISM_NETNS_PREFIX", "prism-auto-"))
    p.add_argument("--timeout", type=int, default=1200, help="seconds per command")
    p.add_argument("--cost-only", action="store_true", help="only the search's own cost")
    a = p.parse_args()
    common.begin(a, "bench/auto/run.py")
    try:
        search_cost(a)
        if a.cost_only:
            return
        if os.geteuid() != 0:
            sys.exit("run.py: network namespaces need root")
        with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
            with common.Hosts(HOSTS, a.rate, a.netns_prefix, a.burst) as hosts:
                cluster = os.path.join(tmp, "cluster.yaml")
                # A PS per host; the hosts share this machine's cores.
                common.cluster_yaml(hosts, set(range(hosts.n)), cluster, machine="this-machine")
                profile = a.profile
                if not profile:
                    # The links too: a ring through the namespaces, one rank per host.
                    profile = os.path.join(tmp, "profile.json")
                    calibrate = [a.prism, "calibrate", "-o", profile]
                    if not a.loopback_profile:
                        calibrate += ["--cluster", cluster, "--launcher",
                                      f"ip netns exec {hosts.prefix}{{host}}"]
                    out = common.run(calibrate, timeout=1200)
                    print("Calibration: " + "; ".join(l.strip() for l in out.splitlines()) + "\n")
                for name in a.models.split(","):
                    report_model(a, name, *bench_model(a, name, cluster, profile, hosts, tmp))
    except common.Failed as e:
        sys.exit(f"run.py: a command failed: {e}")


if __name__ == "__main__":
    main()
