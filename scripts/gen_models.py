#!/usr/bin/env python3
"""Writes the generated reference model models/resnet.prism.

A 56-layer ResNet is too long to write by hand, so this script builds it in the canonical text
form, the form `prism` prints back unchanged.
The output is deterministic; the committed files are exactly what it writes.

    python3 scripts/gen_models.py            # rewrite the file
    python3 scripts/gen_models.py --check    # exit 1 if a committed file differs
    python3 scripts/gen_models.py --out DIR  # write into another directory

Python 3 standard library only.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Model:
    """Collects the statements of one model and prints them in canonical form."""

    def __init__(self, name, header):
        self.name = name
        self.header = header
        self.inputs = []
        self.variables = []
        self.ops = []
        self.params = 0
        self.minimize = None

    @staticmethod
    def _group(lines, comment, blank):
        out = [""] if blank else []
        for c in comment or []:
            out.append("// " + c)
        return out + lines

    def input(self, name, dtype, dims, comment=None, blank=False):
        self.inputs += self._group(["input %s : %s" % (name, typestr(dtype, dims))], comment,
                                   blank)

    def data(self, spec, comment=None, blank=False):
        self.inputs += self._group(['data "%s"' % spec], comment, blank)

    def var(self, name, dims, init, comment=None, blank=False):
        self.params += product(dims)
        self.variables += self._group(["var %s : %s = %s" % (name, typestr("f32", dims), init)],
                                      comment, blank)
        return name

    def op(self, result, opname, operands, attrs=(), comment=None, blank=False):
        args = list(operands) + ["%s = %s" % (k, attrstr(v)) for k, v in attrs]
        line = "%%%s = %s(%s)" % (result, opname, ", ".join(args))
        self.ops += self._group([line], comment, blank)
        return "%" + result

    def text(self):
        lines = ["// " + h for h in self.header]
        lines.append("model %s {" % self.name)
        body = self.inputs + [""] + self.variables + [""] + self.ops + [""] + [self.minimize]
        lines += [("  " + l) if l else "" for l in body]
        lines.append("}")
        return "\n".join(lines) + "\n"


def product(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def dimstr(d):
    return "B" if d == "B" else str(d)


def typestr(dtype, dims):
    return "%s[%s]" % (dtype, ", ".join(dimstr(d) for d in dims))


def floatstr(x):
    # Shortest round-trip digits, as the printer writes them. Python's repr and C++'s
    # std::to_chars agree on plain decimals between 1e-4 and 1e15 (all this script uses).
    s = repr(float(x))
    assert "e" not in s and "n" not in s, s
    return s


def attrstr(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return floatstr(v)
    if isinstance(v, (list, tuple)):
        return "[%s]" % ", ".join(dimstr(d) for d in v)
    return str(v)


def grouped(n):
    return "{:,}".format(n)


# ---------------------------------------------------------------------------------------------
# resnet: a ResNet-56-style network (3 stages x 9 basic blocks x 2 convolutions) for 28x28x1
# images.

STAGES = [(16, 1), (32, 2), (64, 2)]  # (channels, stride of the first block)
BLOCKS = 9
IMAGE = 28
CLASSES = 10


def resnet():
    m = Model("resnet", [])
    m.input("x", "f32", ["B", IMAGE, IMAGE, 1],
            comment=["Images (NHWC, one channel) and their class labels."])
    m.input("y", "i32", ["B"])
    m.data("fashion-mnist")

    stem_c = STAGES[0][0]
    sw = m.var("stem.w", [3, 3, 1, stem_c], "glorot_uniform",
               comment=["Stem: a 3x3 convolution to %d channels." % stem_c])
    sb = m.var("stem.b", [stem_c], "zeros")
    conv = m.op("stem.conv", "conv2d", ["x", sw],
                comment=["Stem: [B, %d, %d, 1] -> [B, %d, %d, %d]." % (IMAGE, IMAGE, IMAGE, IMAGE,
                                                                       stem_c)])
    pre = m.op("stem.bias", "bias_add", [conv, sb])
    cur = m.op("stem.out", "relu", [pre])

    size, cin = IMAGE, stem_c
    for si, (cout, stride) in enumerate(STAGES, start=1):
        for bi in range(1, BLOCKS + 1):
            p = "block%d.%d" % (si, bi)
            st = stride if bi == 1 else 1
            out_size = -(-size // st)
            vcomment = None
            if bi == 1:
                vcomment = ["Stage %d: %d blocks of %d channels at %dx%d." % (si, BLOCKS, cout,
                                                                          out_size, out_size)]
            w1 = m.var(p + ".conv1.w", [3, 3, cin, cout], "glorot_uniform", comment=vcomment,
                       blank=bi == 1)
            b1 = m.var(p + ".conv1.b", [cout], "zeros")
            w2 = m.var(p + ".conv2.w", [3, 3, cout, cout], "zeros")
            b2 = m.var(p + ".conv2.b", [cout], "zeros")
            project = st != 1 or cin != cout
            if project:
                pw = m.var(p + ".proj.w", [1, 1, cin, cout], "glorot_uniform")
                pb = m.var(p + ".proj.b", [cout], "zeros")

            if bi == 1 and project:
                desc = ("Block %d.%d: %dx%dx%d -> %dx%dx%d (stride %d); 1x1 projection on the "
                        "shortcut." % (si, bi, size, size, cin, out_size, out_size, cout, st))
            else:
                desc = "Block %d.%d: relu(x + conv2(relu(conv1(x))))." % (si, bi)
            sattrs = [("stride", [st, st])] if st != 1 else []
            c1 = m.op(p + ".conv1", "conv2d", [cur, w1], sattrs, comment=[desc], blank=True)
            a1 = m.op(p + ".bias1", "bias_add", [c1, b1])
            r1 = m.op(p + ".relu1", "relu", [a1])
            c2 = m.op(p + ".conv2", "conv2d", [r1, w2])
            a2 = m.op(p + ".bias2", "bias_add", [c2, b2])
            shortcut = cur
            if project:
                pc = m.op(p + ".proj", "conv2d", [cur, pw], sattrs)
                shortcut = m.op(p + ".shortcut", "bias_add", [pc, pb])
            s = m.op(p + ".sum", "add", [a2, shortcut])
            cur = m.op(p + ".out", "relu", [s])
            size, cin = out_size, cout

    fw = m.var("fc.w", [cin, CLASSES], "glorot_uniform",
               comment=["Classifier on the globally pooled %d features." % cin], blank=True)
    fb = m.var("fc.b", [CLASSES], "zeros")
    pooled = m.op("pooled", "reduce_mean", [cur], [("axes", [1, 2])],
                  comment=["Global average pool over the %dx%d positions, dense layer, loss."
                           % (size, size)], blank=True)
    mm = m.op("logits.mm", "matmul", [pooled, fw])
    logits = m.op("logits", "bias_add", [mm, fb])
    m.op("loss", "softmax_cross_entropy", [logits, "y"])
    m.minimize = "minimize %loss with momentum(lr = 0.1, momentum = 0.9)"

    depth = 1 + len(STAGES) * BLOCKS * 2 + 1
    m.header = [
        "A ResNet-%d-style network for 28x28x1 images: a 3x3 stem, 3 stages of %d basic blocks"
        % (depth, BLOCKS),
        "(two 3x3 convolutions with bias and relu, residual add) at %s channels;"
        % "/".join(str(c) for c, _ in STAGES),
        "stages 2 and 3 start with a stride-2 convolution and a 1x1 stride-2 projection on the",
        "shortcut (28 -> 14 -> 7); global average pool; a dense layer to %d classes." % CLASSES,
        "There is no batch norm, so the second convolution of every block starts at zero and",
        "every block starts as the identity (or as its shortcut). Momentum SGD.",
        "%s parameters, all dense." % grouped(m.params),
        "Generated by scripts/gen_models.py.",
    ]
    return m


MODELS = {"resnet.prism": resnet}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "models"),
                    help="directory to write into (default: models/)")
    ap.add_argument("--check", action="store_true",
                    help="compare with the files in --out instead of writing them")
    args = ap.parse_args()
    stale = []
    for fname, build in sorted(MODELS.items()):
        text = build().text()
        path = os.path.join(args.out, fname)
        if args.check:
            try:
                with open(path, encoding="utf-8") as f:
                    if f.read() != text:
                        stale.append(path)
            except FileNotFoundError:
                stale.append(path)
            continue
        os.makedirs(args.out, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    if stale:
        for p in stale:
            print("out of date: %s (run scripts/gen_models.py)" % p, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
