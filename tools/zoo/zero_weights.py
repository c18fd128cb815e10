#!/usr/bin/python3
"""Writes a copy of an ONNX model whose float initializers are all zero,
except small constants (<= 256 values),
so that it compresses to almost nothing (gzip) and can be carried to a
machine that cannot export or download models:

    zero_weights.py IN.onnx OUT.onnx

The graph, the shapes and the byte size of every initializer are kept, so
parse, optimisation, session creation (weight packing) and the per-node
latency are those of the original: dense fp32 kernels do not depend on the
weight values (zeros are not denormals; activations become zeros too).
The outputs are of course not the original's. Used by
bench/asyfunc_device_pack.sh for the AsyFunc profiles (issue 17).
"""
import sys

import onnx
from onnx import TensorProto


def zero(t):
    if t.data_location == TensorProto.EXTERNAL:
        sys.exit(f"zero_weights: {t.name}: external data is not supported")
    if t.raw_data:
        t.raw_data = bytes(len(t.raw_data))
    elif t.data_type == TensorProto.FLOAT and len(t.float_data):
        n = len(t.float_data)
        del t.float_data[:]
        t.float_data.extend([0.0] * n)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: zero_weights.py IN.onnx OUT.onnx")
    m = onnx.load(sys.argv[1])
    for t in m.graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        # weights only: scalars and small constants (Clip bounds, shapes)
        # keep their values, so no operator changes meaning
        if t.data_type == TensorProto.FLOAT and n > 256:
            zero(t)
    onnx.save(m, sys.argv[2])


if __name__ == "__main__":
    main()
