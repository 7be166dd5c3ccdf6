#!/usr/bin/python3
"""Prints the ladder model (bench/ir_scale/LadderModel.cpp) as model text, of about OPS ops:
an embedding read by a gather and a mean, then residual layers add(relu(bias_add(matmul(h, w),
b)), h) of width 8, a softmax loss and adam. For `prism partition` at scale (BENCHMARKS.md).

Usage: bench/ir_scale/ladder.py OPS > ladder.prism
"""
import sys


def main():
    ops = int(sys.argv[1])
    layers = max(1, (ops - 5 + 3) // 4)
    width = 8
    out = ["model ladder {", "  input tokens : i32[B, 4]", "  input labels : i32[B]",
           f"  var emb : f32[1000, {width}] = uniform(min = -0.05, max = 0.05)"]
    for i in range(layers):
        out.append(f"  var l{i}.w : f32[{width}, {width}] = glorot_uniform")
        out.append(f"  var l{i}.b : f32[{width}] = zeros")
    out.append(f"  var out.w : f32[{width}, 10] = glorot_uniform")
    out.append("  %embedded = gather(emb, tokens)")
    out.append("  %h = reduce_mean(%embedded, axes = [1])")
    h = "%h"
    for i in range(layers):
        out.append(f"  %l{i}.mm = matmul({h}, l{i}.w)")
        out.append(f"  %l{i}.z = bias_add(%l{i}.mm, l{i}.b)")
        out.append(f"  %l{i}.a = relu(%l{i}.z)")
        out.append(f"  %l{i}.h = add(%l{i}.a, {h})")
        h = f"%l{i}.h"
    out.append(f"  %logits = matmul({h}, out.w)")
    out.append("  %loss = softmax_cross_entropy(%logits, labels)")
    out.append("  minimize %loss with adam(lr = 0.001)")
    out.append("}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
