#!/usr/bin/python3
"""A small-file, compute-heavy CNN for the live AsyFunc test, written as
ONNX text format and encoded by protoc against Debian's onnx.proto (no
onnx or torch package needed):

    gen_model.py OUT.onnx [--size S] [--channels C] [--convs K]

x [N,1,S,S] -> Conv 1->C 3x3 + Relu -> K x (Conv C->C 3x3 + Relu)
  -> MaxPool 4x4 -> Flatten -> Gemm -> H + Relu -> Gemm H->10 -> y [N,10]

With the defaults (S 48, C 32, K 3, H 512) the convolutions hold 28 k
parameters but cost ~130 MFLOP per sample (CPU-sensitive blocks with few
weights, the kind AsyFunc gives a shadow), the head 2.4 M parameters for
~5 MFLOP (VGG's FC layers in small). Weights are fixed-seed random
(numpy), so the file is the same on every run.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np


def tensor(name, arr):
    raw = arr.astype("<f4").tobytes()
    esc = "".join("\\%03o" % b for b in raw)
    dims = "".join(f" dims: {d}" for d in arr.shape)
    return f'initializer {{{dims} data_type: 1 name: "{name}" raw_data: "{esc}" }}\n'


def node(op, ins, outs, attrs=""):
    i = "".join(f' input: "{x}"' for x in ins)
    o = "".join(f' output: "{x}"' for x in outs)
    return f'node {{{i}{o} op_type: "{op}"{attrs} }}\n'


def ints(name, vals):
    v = "".join(f" ints: {x}" for x in vals)
    return f' attribute {{ name: "{name}"{v} type: INTS }}'


def value(kind, name, dims):
    d = "".join(f" dim {{ dim_param: \"{x}\" }}" if isinstance(x, str)
                else f" dim {{ dim_value: {x} }}" for x in dims)
    return (f'{kind} {{ name: "{name}" type {{ tensor_type {{ elem_type: 1 '
            f'shape {{{d} }} }} }} }}\n')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--size", type=int, default=48)
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--convs", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=512)
    a = ap.parse_args()
    rng = np.random.default_rng(17)
    c, s = a.channels, a.size
    g = ""
    conv = ints("kernel_shape", [3, 3]) + ints("pads", [1, 1, 1, 1])
    prev, cin = "x", 1
    for k in range(a.convs + 1):
        w = rng.standard_normal((c, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9))
        g += tensor(f"w{k}", w) + tensor(f"b{k}", rng.standard_normal(c) * 0.01)
        g += node("Conv", [prev, f"w{k}", f"b{k}"], [f"c{k}"], conv)
        g += node("Relu", [f"c{k}"], [f"r{k}"])
        prev, cin = f"r{k}", c
    # a VGG-like head: few FLOPs, most of the weights (memory-bound, so
    # hardly slower per batch: not worth a shadow)
    g += node("MaxPool", [prev], ["pool"], ints("kernel_shape", [4, 4]) + ints("strides", [4, 4]))
    g += node("Flatten", ["pool"], ["flat"], ' attribute { name: "axis" i: 1 type: INT }')
    feat = c * (s // 4) * (s // 4)
    tb = ' attribute { name: "transB" i: 1 type: INT }'
    g += tensor("fw", rng.standard_normal((a.hidden, feat)) * np.sqrt(2.0 / feat))
    g += tensor("fb", np.zeros(a.hidden))
    g += node("Gemm", ["flat", "fw", "fb"], ["h"], tb) + node("Relu", ["h"], ["hr"])
    g += tensor("ow", rng.standard_normal((10, a.hidden)) * 0.05) + tensor("ob", np.zeros(10))
    g += node("Gemm", ["hr", "ow", "ob"], ["y"], tb)
    g += value("input", "x", ["N", 1, s, s]) + value("output", "y", ["N", 10])
    text = f'ir_version: 7 opset_import {{ version: 13 }} graph {{ name: "af_cnn"\n{g}}}\n'
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
        tmp = f.name
    try:
        with open(tmp) as src, open(a.out, "wb") as dst:
            r = subprocess.run(["protoc", "--encode=onnx.ModelProto", "-I/usr/include",
                                "onnx/onnx.proto"], stdin=src, stdout=dst)
    finally:
        os.unlink(tmp)
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
