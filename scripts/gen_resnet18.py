#!/usr/bin/python3
"""Writes models/resnet18.prism: torchvision's ResNet-18 (1-channel 7x7 stem, 10 classes, as
tests/lit/import/Inputs/torch_models.py builds it) exported by PyTorch and imported with
`prism import --init fresh --sync-batch-norm`: it needs no values file, and its batch norms
normalize with the whole step's batch on every worker and tower, so data-parallel training equals
one device's (`prism verify`).

    /usr/bin/python3 scripts/gen_resnet18.py PRISM            # rewrite the file
    /usr/bin/python3 scripts/gen_resnet18.py PRISM --check    # exit 1 if the committed file differs
    /usr/bin/python3 scripts/gen_resnet18.py PRISM --out DIR  # write into another directory

PRISM is the prism tool (build/tools/prism). Needs PyTorch and torchvision (Debian's
python3-torch and python3-torchvision).
"""

import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "lit", "import", "Inputs"))
import torch_models  # noqa: E402

# Momentum SGD: from a fresh start the loss on Fashion-MNIST falls from 2.6 to about 0.7 (the mean
# of steps 40 to 49) in 50 steps of 64 images; lr 0.05 (0.85) and plain SGD at lr 0.1 (0.84,
# after a first jump to 10) did worse.
OPTIMIZER = "momentum(lr = 0.01, momentum = 0.9)"


def generate(prism, directory):
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = os.path.join(tmp, "resnet18.onnx")
        torch_models.export("resnet18", onnx_path)
        subprocess.run([prism, "import", onnx_path, "-o", os.path.join(directory, "resnet18.prism"),
                        "--init", "fresh", "--sync-batch-norm", "--data", "fashion-mnist",
                        "--optimizer", OPTIMIZER,
                        "--name", "resnet18", "-q"], check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("prism", help="the prism tool")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--out", default=os.path.join(ROOT, "models"))
    args = parser.parse_args()
    if not args.check:
        generate(args.prism, args.out)
        return
    with tempfile.TemporaryDirectory() as tmp:
        generate(args.prism, tmp)
        with open(os.path.join(tmp, "resnet18.prism")) as f:
            fresh = f.read()
    with open(os.path.join(args.out, "resnet18.prism")) as f:
        committed = f.read()
    if fresh != committed:
        sys.exit("models/resnet18.prism differs from what scripts/gen_resnet18.py writes")


if __name__ == "__main__":
    main()
