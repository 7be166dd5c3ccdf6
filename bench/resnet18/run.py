#!/usr/bin/python3
"""ResNet-18 (models/resnet18.prism: torchvision's, imported) on Fashion-MNIST against PyTorch
training the same module (bench/pytorch_peer.py resnet18: momentum SGD lr 0.01, batch 64).

Accuracy: test accuracy (evaluation mode: batch norm on its running averages) at the end of each
of --epochs epochs, for Prism on one device (--threads 2), Prism data-parallel on two worker
processes (--cluster local:2, one thread each, synchronized batch norm) and PyTorch (2 threads).
Speed: --repeats alternating windows of --steps steps of Prism and PyTorch on one device at 2
threads: samples/s (median and range), their ratio, and each process's peak RSS.

Usage: bench/resnet18/run.py [--prism build/tools/prism] [--epochs 3] [--repeats 3]
                             [--steps 150] [--skip-accuracy] [--skip-speed]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "resnet18.prism")
BATCH = 64


def run_measured(cmd, env):
    """Runs a command alone; returns (stdout, peak RSS in MiB of that process)."""
    with tempfile.TemporaryFile(mode="w+") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.PIPE, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            sys.exit(f"{' '.join(cmd)} failed ({code}): {proc.stderr.read()}")
        out.seek(0)
        return out.read(), usage.ru_maxrss / 1024


def prism_train(prism, env, extra):
    """prism train on Fashion-MNIST; returns (metrics lines, peak RSS of the prism process)."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        _, rss = run_measured([prism, "train", MODEL, "--batch", str(BATCH), "--seed", "0",
                               "--quiet", "--metrics-out", metrics] + extra, env)
        return [json.loads(line) for line in open(metrics)], rss


def torch_train(env, extra):
    out, rss = run_measured(["/usr/bin/python3", os.path.join(ROOT, "bench", "pytorch_peer.py"),
                             "resnet18", "--batch", str(BATCH), "--threads", "2"] + extra, env)
    return json.loads(out.strip().splitlines()[-1]), rss


def accuracy(prism, epochs, env):
    print("| run | " + " | ".join(f"test accuracy after epoch {e + 1}" for e in range(epochs)) +
          " |")
    print("| --- |" + " --- |" * epochs)
    for label, extra in (("Prism, one device (2 threads)", ["--threads", "2"]),
                         ("Prism, `--cluster local:2` (1 thread each)",
                          ["--cluster", "local:2", "--threads", "1"])):
        lines, _ = prism_train(prism, env, ["--epochs", str(epochs)] + extra)
        acc = [line["test_accuracy"] for line in lines if "test_accuracy" in line]
        print(f"| {label} | " + " | ".join(f"{a:.4f}" for a in acc) + " |", flush=True)
    result, _ = torch_train(env, ["--epochs", str(epochs), "--eval-every-epoch"])
    print("| PyTorch (2 threads) | " +
          " | ".join(f"{a:.4f}" for a in result["test_accuracy_by_epoch"]) + " |", flush=True)


def speed(prism, repeats, steps, env):
    prism_rates, torch_rates, prism_rss, torch_rss = [], [], [], []
    for _ in range(repeats):
        lines, rss = prism_train(prism, env, ["--steps", str(steps), "--threads", "2",
                                              "--no-eval"])
        # Steady state: the first steps set up kernels and fault pages in.
        steady = [line for line in lines if "loss" in line][5:]
        seconds = sum(BATCH / line["samples_per_sec"] for line in steady)
        prism_rates.append(len(steady) * BATCH / seconds)
        prism_rss.append(rss)
        result, rss = torch_train(env, ["--steps", str(steps)])
        torch_rates.append(result["samples_per_sec"])
        torch_rss.append(rss)
    ratios = [p / t for p, t in zip(prism_rates, torch_rates)]
    print("| side | samples/s (median, range) | peak RSS |")
    print("| --- | --- | --- |")
    print(f"| Prism | {statistics.median(prism_rates):.0f} ({min(prism_rates):.0f}–"
          f"{max(prism_rates):.0f}) | {max(prism_rss):.0f} MiB |")
    print(f"| PyTorch | {statistics.median(torch_rates):.0f} ({min(torch_rates):.0f}–"
          f"{max(torch_rates):.0f}) | {max(torch_rss):.0f} MiB |")
    print(f"\nPrism / PyTorch: {statistics.median(ratios):.2f}× (runs: " +
          ", ".join(f"{r:.2f}" for r in ratios) + ")", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--prism", default=os.path.join(ROOT, "build", "tools", "prism"))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--skip-accuracy", action="store_true")
    p.add_argument("--skip-speed", action="store_true")
    a = p.parse_args()
    # As bench/single_device: large freed buffers stay with the process, for both sides.
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    env.setdefault("MALLOC_MMAP_MAX_", "0")
    env.setdefault("MALLOC_TRIM_THRESHOLD_", str(1 << 36))
    if not a.skip_speed:
        speed(a.prism, a.repeats, a.steps, env)
    if not a.skip_accuracy:
        print()
        accuracy(a.prism, a.epochs, env)


if __name__ == "__main__":
    main()
