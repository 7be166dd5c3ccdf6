"""Compares the per-step losses of two `prism train --metrics-out` files.

Usage: compare_losses.py A.jsonl B.jsonl TOLERANCE
Prints "losses agree within T over N steps" and exits 0 when every step's losses are within the
relative tolerance, else prints the first step that differs and exits 1.
"""
import json
import sys


def losses(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {row["step"]: row["loss"] for row in rows if "loss" in row and "step" in row}


def main():
    a, b, tolerance = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
    if sorted(a) != sorted(b) or not a:
        print(f"the files have different steps: {sorted(a)} and {sorted(b)}")
        return 1
    for step in sorted(a):
        scale = max(abs(a[step]), abs(b[step]), 1e-12)
        if abs(a[step] - b[step]) / scale > tolerance:
            print(f"losses differ at step {step}: {a[step]} and {b[step]}")
            return 1
    print(f"losses agree within {tolerance:g} over {len(a)} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
